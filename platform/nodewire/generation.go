package nodewire

import (
	"encoding/json"
	"math"
	"time"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// Generation is a committed deployment generation as Core publishes it to
// a node (ServeGenerations): what the node builds its adapter for.
type Generation struct {
	Number       uint64
	ProviderKind string
	// Public is the generation's normalized public configuration, a JSON
	// object.
	Public        json.RawMessage
	Specification sandbox.Specification
	// DeploymentDigest is providers.DeploymentDigest of ProviderKind and
	// Specification as Core computed it.
	DeploymentDigest string
}

// maxPublicConfiguration bounds a generation's public configuration on
// the wire (a node provider's is always {}).
const maxPublicConfiguration = 64 << 10

// GenerationToWire converts g; a suspension policy that is not whole
// seconds is refused (the deployment stores whole seconds).
func GenerationToWire(g Generation) (*pb.Generation, error) {
	spec := g.Specification
	m := &pb.Generation{
		Number:              g.Number,
		ProviderKind:        g.ProviderKind,
		PublicConfiguration: g.Public,
		DeploymentDigest:    g.DeploymentDigest,
		Specification: &pb.Specification{
			Resources:   ResourcesToWire(spec.Resources),
			MaxActive:   spec.MaxActive,
			MaxRetained: spec.MaxRetained,
		},
	}
	if !spec.Suspension.IsZero() {
		if spec.Suspension.Idle%time.Second != 0 || spec.Suspension.Retention%time.Second != 0 {
			return nil, errdefs.Invalid("generation.specification.suspension", "must be whole seconds")
		}
		m.Specification.SuspensionIdleSeconds = int64(spec.Suspension.Idle / time.Second)
		m.Specification.SuspensionRetentionSeconds = int64(spec.Suspension.Retention / time.Second)
	}
	return m, nil
}

// GenerationFromWire converts a published generation and checks it
// (paths "generation.*"): a positive number, a provider kind, a public
// configuration that is a JSON object of at most 64 KiB, a specification
// within the shared bounds and a deployment digest. Whether the digest is
// the generation's is the node's check (providers.DeploymentDigest).
func GenerationFromWire(m *pb.Generation) (Generation, error) {
	const path = "generation"
	if m == nil {
		return Generation{}, required(path)
	}
	if m.GetNumber() == 0 || m.GetNumber() > math.MaxInt64 {
		return Generation{}, errdefs.Invalid(sub(path, "number"), "must be between 1 and 2^63-1")
	}
	if m.GetProviderKind() == "" {
		return Generation{}, required(sub(path, "provider_kind"))
	}
	if m.GetDeploymentDigest() == "" {
		return Generation{}, required(sub(path, "deployment_digest"))
	}
	raw := m.GetPublicConfiguration()
	var obj map[string]json.RawMessage
	if len(raw) > maxPublicConfiguration || json.Unmarshal(raw, &obj) != nil || obj == nil {
		return Generation{}, errdefs.Invalid(sub(path, "public_configuration"), "must be a JSON object of at most 64 KiB")
	}
	s := m.GetSpecification()
	if s == nil {
		return Generation{}, required(sub(path, "specification"))
	}
	res, err := resourcesFromWire(sub(path, "specification.resources"), s.GetResources())
	if err != nil {
		return Generation{}, err
	}
	spec := sandbox.Specification{Resources: res, MaxActive: s.GetMaxActive(), MaxRetained: s.GetMaxRetained()}
	idle, retain := s.GetSuspensionIdleSeconds(), s.GetSuspensionRetentionSeconds()
	const maxSeconds = math.MaxInt64 / int64(time.Second)
	switch {
	case idle == 0 && retain == 0:
	case idle <= 0 || retain <= 0 || idle > maxSeconds || retain > maxSeconds:
		return Generation{}, errdefs.Invalid(sub(path, "specification.suspension"), "idle and retention go together, each positive")
	default:
		spec.Suspension = sandbox.SuspensionPolicy{Idle: time.Duration(idle) * time.Second, Retention: time.Duration(retain) * time.Second}
	}
	if err := spec.Validate(); err != nil {
		err = rebase(err, "specification", sub(path, "specification"))
		return Generation{}, rebase(err, "suspension", sub(path, "specification.suspension"))
	}
	return Generation{
		Number:           m.GetNumber(),
		ProviderKind:     m.GetProviderKind(),
		Public:           json.RawMessage(raw),
		Specification:    spec,
		DeploymentDigest: m.GetDeploymentDigest(),
	}, nil
}
