package docker

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providercontract"
)

// Kind is the Docker provider's kind.
const Kind = "docker"

// The ownership labels carried by every container and volume.
const (
	LabelInstallation = "io.berth.installation"
	LabelTenant       = "io.berth.tenant"
	LabelEnvironment  = "io.berth.environment"
	LabelAllocation   = "io.berth.allocation"
)

// ReasonNoNativeBatch is the reason code of ObserveBatch, unsupported.
const ReasonNoNativeBatch providercontract.ReasonCode = "docker_no_native_batch"

// Operations is the adapter's one declaration, shared by its instances and
// its registration. Checkpoints are supported as filesystem checkpoints
// (checkpoint.go; CRIU does not work on these hosts, so no process memory
// is captured).
func Operations() providercontract.Operations {
	s := providercontract.Supported()
	return providercontract.Operations{
		sandbox.OpCreate: s, sandbox.OpGetInfo: s, sandbox.OpRenew: s, sandbox.OpKill: s, sandbox.OpRunCommand: s,
		sandbox.OpInitial: s, sandbox.OpNewCompute: s, sandbox.OpGetCompute: s, sandbox.OpSuspend: s, sandbox.OpCapture: s, sandbox.OpCreateSeeded: s, sandbox.OpExportSnapshot: s, sandbox.OpImportSnapshot: s,
		sandbox.OpResume: s, sandbox.OpResumeCompute: s, sandbox.OpKillCompute: s,
		sandbox.OpDeleteSnapshot: s, sandbox.OpRunCommandCompute: s,
		sandbox.OpObserve:           s,
		sandbox.OpObserveBatch:      providercontract.Unsupported(ReasonNoNativeBatch),
		sandbox.OpDiscoverSelection: providercontract.Unsupported(nodeconfig.ReasonNoDiscovery),
		sandbox.OpVerifyCredential:  providercontract.Unsupported(nodeconfig.ReasonNoCredential),
	}
}

// Options configure a Provider.
type Options struct {
	// InstallationID binds every resource to the installation.
	InstallationID string
	Config         NodeConfig
	// Seccomp is the verified profile (LoadSeccompProfile).
	Seccomp []byte
	// Resources are the deployment's per-sandbox limits, used by the probe's
	// capacity check; Create takes its limits from the request.
	Resources sandbox.Resources
	// IntentDirectory is where the adapter records each volume name it
	// asks the engine to create, before asking (intents.go says why); ""
	// records nothing, and an unlabelled volume then stays foreign.
	IntentDirectory string
}

// Provider is the Docker adapter.
type Provider struct {
	ops  providercontract.Operations
	cli  *client.Client
	opts Options

	// mu guards creating, the Creates in progress in this process by
	// container name: Kill places no tombstone, and Housekeep removes
	// none, for a name whose Create is still running here (tombstone.go).
	mu       sync.Mutex
	creating map[string]int
}

var _ sandbox.SandboxProvider = (*Provider)(nil)

// NewClient returns a Docker Engine client for host ("unix:///path" or, for
// fixtures, "tcp://addr"). It never reads DOCKER_HOST or other environment
// variables, negotiates the API version, and never reuses a connection, so
// no request is ever resent by net/http behind the adapter's back.
func NewClient(host string) (*client.Client, error) {
	// An empty TLSNextProto map keeps HTTP/2 off; without it, cloning the
	// transport fills in a TLS configuration and the client would speak
	// HTTPS to a Unix socket.
	transport := &http.Transport{
		DisableKeepAlives: true,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	cli, err := client.New(client.WithHTTPClient(&http.Client{Transport: transport}), client.WithHost(host))
	if err != nil {
		return nil, errdefs.Invalid("node.socket", "cannot form a Docker client")
	}
	return cli, nil
}

// New returns an adapter over cli. With a nil cli the adapter has no native
// client: only the operations declared unsupported may be called.
func New(cli *client.Client, opts Options) *Provider {
	return &Provider{ops: Operations(), cli: cli, opts: opts, creating: map[string]int{}}
}

// ProviderOperations returns a copy of the declaration.
func (p *Provider) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// Name is the deterministic name of ref's container; its volumes are
// Name+"-home" and Name+"-environment".
func (p *Provider) Name(ref sandbox.Reference) string {
	return ResourceName(p.opts.InstallationID, ref)
}

// ResourceName derives the container name of ref in an installation.
func ResourceName(installation string, ref sandbox.Reference) string {
	sum := sha256.Sum256([]byte(installation + "\x00" + ref.TenantID + "\x00" + ref.EnvironmentID + "\x00" + ref.AllocationID))
	return "berth-" + hex.EncodeToString(sum[:12])
}

// The suffixes of a volume group's two volumes (intents.go).
const (
	homeSuffix        = "-home"
	environmentSuffix = "-environment"
)

// HomeVolume and EnvironmentVolume name ref's volumes.
func (p *Provider) HomeVolume(ref sandbox.Reference) string { return p.Name(ref) + homeSuffix }

// EnvironmentVolume names ref's environment volume.
func (p *Provider) EnvironmentVolume(ref sandbox.Reference) string {
	return p.Name(ref) + environmentSuffix
}

// Labels returns the ownership labels of ref's resources.
func (p *Provider) Labels(ref sandbox.Reference) map[string]string {
	return map[string]string{
		LabelInstallation: p.opts.InstallationID,
		LabelTenant:       ref.TenantID,
		LabelEnvironment:  ref.EnvironmentID,
		LabelAllocation:   ref.AllocationID,
	}
}

// owns reports whether labels carry every ownership label of ref.
func (p *Provider) owns(ref sandbox.Reference, labels map[string]string) bool {
	for k, v := range p.Labels(ref) {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// outcome classifies a Docker client error.
type outcome int

const (
	outcomeUnknown  outcome = iota // transport failure, cancellation, 5xx: may have happened
	outcomeNotFound                // definite 404
	outcomeConflict                // definite 409
	outcomeRejected                // definite 4xx rejection: nothing happened
)

func classify(err error) outcome {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return outcomeUnknown
	case cerrdefs.IsNotFound(err):
		return outcomeNotFound
	case cerrdefs.IsConflict(err):
		return outcomeConflict
	case cerrdefs.IsInvalidArgument(err) || cerrdefs.IsPermissionDenied(err):
		return outcomeRejected
	}
	return outcomeUnknown
}
