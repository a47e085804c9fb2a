package deploymentadmin

import (
	"context"
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/deployment"
)

// maxObjectBytes bounds the JSON of a candidate's configuration and
// credential objects.
const maxObjectBytes = 64 << 10

// NewServer returns s as berth.admin.v1.DeploymentService, for
// admin.Options.Deployment. It only converts: requests to s's arguments,
// its results to responses, the logic's field names to request field
// paths; the admin server converts errors once. The credential is input
// only: no response carries it, only has_credential.
func NewServer(s *deployment.Service) adminv1.DeploymentServiceServer {
	return &server{svc: s}
}

// requestPaths maps the registry's and the specification's field paths
// (and the logic's own, "provider.kind", "specification.suspension") to
// the request's, longest prefix first. A field of no known place is
// reported on the candidate.
var requestPaths = admin.FieldPaths{Default: "candidate", Renames: []admin.Rename{
	{From: "provider.kind", To: "candidate.provider_kind"},
	{From: "configuration.credential", To: "candidate.credential"},
	{From: "configuration.public", To: "candidate.configuration"},
	{From: "configuration", To: "candidate.configuration"},
	{From: "resources", To: "candidate.specification"},
	{From: "specification.suspension", To: "candidate.specification.suspension"},
	{From: "specification", To: "candidate.specification"},
	{From: "suspension", To: "candidate.specification.suspension"},
	{From: "expected_generation", To: "expected_generation"},
	{From: "update_mask", To: "update_mask"},
}}

type server struct {
	adminv1.UnimplementedDeploymentServiceServer
	svc *deployment.Service
}

func (g *server) GetDeployment(ctx context.Context, req *adminv1.GetDeploymentRequest) (*adminv1.GetDeploymentResponse, error) {
	return onDeployment(req.GetName(), func() (deployment.Deployment, error) { return g.svc.Get(ctx) },
		func(pb *adminv1.Deployment) *adminv1.GetDeploymentResponse {
			return &adminv1.GetDeploymentResponse{Deployment: pb}
		})
}

func (g *server) PreviewDeployment(ctx context.Context, req *adminv1.PreviewDeploymentRequest) (*adminv1.PreviewDeploymentResponse, error) {
	c, set, err := maskedCandidate(req.GetCandidate(), req.GetUpdateMask())
	if err != nil {
		return nil, err
	}
	var p deployment.Preview
	if set != nil {
		p, err = g.svc.PreviewReplacement(ctx, c, set)
	} else {
		p, err = g.svc.Preview(ctx, c)
	}
	return reply(p.Deployment, err, func(pb *adminv1.Deployment) *adminv1.PreviewDeploymentResponse {
		return &adminv1.PreviewDeploymentResponse{Deployment: pb, Changed: p.Changed, ExpectedGeneration: p.ExpectedGeneration}
	})
}

func (g *server) ReplaceDeployment(ctx context.Context, req *adminv1.ReplaceDeploymentRequest) (*adminv1.ReplaceDeploymentResponse, error) {
	c, set, err := maskedCandidate(req.GetCandidate(), req.GetUpdateMask())
	if err != nil {
		return nil, err
	}
	r, err := g.svc.Replace(ctx, c, set, req.GetExpectedGeneration())
	return reply(r.Deployment, err, func(pb *adminv1.Deployment) *adminv1.ReplaceDeploymentResponse {
		out := &adminv1.ReplaceDeploymentResponse{
			Deployment: pb, Changed: r.Changed, RevokedEnrollmentTokens: r.RevokedTokens,
			AdmissionPause: durationpb.New(r.AdmissionPause),
		}
		for _, id := range r.RetiredNodes {
			out.RetiredNodes = append(out.RetiredNodes, admin.NodeName.Format(id.String()))
		}
		return out
	})
}

// maskFields maps an update_mask path (relative to the candidate) to the
// logic's fields.
var maskFields = map[string][]string{
	"provider_kind":              {deployment.FieldProviderKind},
	"configuration":              {deployment.FieldConfiguration},
	"credential":                 {deployment.FieldCredential},
	"specification.cpu_millis":   {deployment.FieldCPUMillis},
	"specification.memory_bytes": {deployment.FieldMemoryBytes},
	"specification.disk_bytes":   {deployment.FieldDiskBytes},
	"specification.max_active":   {deployment.FieldMaxActive},
	"specification.max_retained": {deployment.FieldMaxRetained},
	"specification.suspension":   {deployment.FieldSuspension},
	"specification": {deployment.FieldCPUMillis, deployment.FieldMemoryBytes, deployment.FieldDiskBytes,
		deployment.FieldMaxActive, deployment.FieldMaxRetained, deployment.FieldSuspension},
}

// maskedCandidate converts a candidate with its update_mask: a partial
// candidate and the fields it sets, or a complete one (nil fields).
func maskedCandidate(c *adminv1.DeploymentCandidate, m *fieldmaskpb.FieldMask) (deployment.Candidate, deployment.Fields, error) {
	set, err := fieldsFromMask(m)
	if err != nil {
		return deployment.Candidate{}, nil, err
	}
	out, err := candidateFromProto(c, set != nil)
	return out, set, err
}

// fieldsFromMask converts an update_mask: nil (a complete candidate) when
// it is unset, the named fields otherwise. An unknown or empty path list
// is invalid.
func fieldsFromMask(m *fieldmaskpb.FieldMask) (deployment.Fields, error) {
	if m == nil {
		return nil, nil
	}
	if len(m.GetPaths()) == 0 {
		return nil, errdefs.Invalid("update_mask", "names no field")
	}
	set := deployment.Fields{}
	for _, p := range m.GetPaths() {
		f, ok := maskFields[p]
		if !ok {
			return nil, errdefs.Invalid("update_mask", "names an unknown field")
		}
		set = append(set, f...)
	}
	return set, nil
}

func (g *server) CommitDeployment(ctx context.Context, req *adminv1.CommitDeploymentRequest) (*adminv1.CommitDeploymentResponse, error) {
	c, err := candidateFromProto(req.GetCandidate(), false)
	if err != nil {
		return nil, err
	}
	d, err := g.svc.Commit(ctx, c, req.GetExpectedGeneration())
	return reply(d, err, func(pb *adminv1.Deployment) *adminv1.CommitDeploymentResponse {
		return &adminv1.CommitDeploymentResponse{Deployment: pb}
	})
}

func (g *server) DisableProvider(ctx context.Context, req *adminv1.DisableProviderRequest) (*adminv1.DisableProviderResponse, error) {
	return onDeployment(req.GetName(), func() (deployment.Deployment, error) { return g.svc.Disable(ctx) },
		func(pb *adminv1.Deployment) *adminv1.DisableProviderResponse {
			return &adminv1.DisableProviderResponse{Deployment: pb}
		})
}

func (g *server) EnableProvider(ctx context.Context, req *adminv1.EnableProviderRequest) (*adminv1.EnableProviderResponse, error) {
	return onDeployment(req.GetName(), func() (deployment.Deployment, error) { return g.svc.Enable(ctx) },
		func(pb *adminv1.Deployment) *adminv1.EnableProviderResponse {
			return &adminv1.EnableProviderResponse{Deployment: pb}
		})
}

// onDeployment serves a call on the resource name ("deployment"): it
// checks the name, runs call and replies with its Deployment.
func onDeployment[R any](name string, call func() (deployment.Deployment, error), wrap func(*adminv1.Deployment) R) (R, error) {
	if _, err := admin.ValidateName("name", name, admin.DeploymentName); err != nil {
		var zero R
		return zero, err
	}
	d, err := call()
	return reply(d, err, wrap)
}

// reply converts the logic's answer: its error with the logic's field
// names mapped to request paths, or its Deployment wrapped in the
// response.
func reply[R any](d deployment.Deployment, err error, wrap func(*adminv1.Deployment) R) (R, error) {
	var zero R
	if err != nil {
		return zero, requestPaths.Map(err)
	}
	pb, err := deploymentProto(d)
	if err != nil {
		return zero, err
	}
	return wrap(pb), nil
}

// candidateFromProto converts a request's candidate. An absent or empty
// credential object means no credential. A partial candidate (one with an
// update_mask) may leave its specification out: the fields the mask does
// not name are inherited anyway.
func candidateFromProto(c *adminv1.DeploymentCandidate, partial bool) (deployment.Candidate, error) {
	if c == nil {
		return deployment.Candidate{}, errdefs.Invalid("candidate", "required")
	}
	if partial && c.GetSpecification() == nil {
		c = proto.CloneOf(c)
		c.Specification = &adminv1.Specification{}
	}
	out := deployment.Candidate{ProviderKind: c.GetProviderKind()}
	var err error
	if c.GetConfiguration() != nil {
		if out.Public, err = objectJSON("candidate.configuration", c.GetConfiguration()); err != nil {
			return deployment.Candidate{}, err
		}
	}
	if len(c.GetCredential().GetFields()) > 0 {
		cred, err := objectJSON("candidate.credential", c.GetCredential())
		if err != nil {
			return deployment.Candidate{}, err
		}
		out.Credential = sandbox.NewCredential(cred)
	}
	if out.Specification, out.SuspensionOff, err = specificationFromProto(c.GetSpecification()); err != nil {
		return deployment.Candidate{}, err
	}
	return out, nil
}

// objectJSON converts a candidate's object to JSON once it is known to be
// shallow enough (admin.ValidateStruct) and small enough (maxObjectBytes).
func objectJSON(field string, s *structpb.Struct) (json.RawMessage, error) {
	if err := admin.ValidateStruct(field, s); err != nil {
		return nil, err
	}
	b, err := protojson.Marshal(s)
	if err != nil {
		return nil, errdefs.Invalid(field, "not a JSON object")
	}
	if len(b) > maxObjectBytes {
		return nil, errdefs.Invalid(field, "too large")
	}
	return b, nil
}

// specificationFromProto converts a candidate's specification, and
// whether it turns suspension off. An absent suspension policy is the
// zero policy (the logic applies the provider's registered defaults); a
// present one must be complete, or disabled.
func specificationFromProto(s *adminv1.Specification) (sandbox.Specification, bool, error) {
	const field = "candidate.specification"
	if s == nil {
		return sandbox.Specification{}, false, errdefs.Invalid(field, "required")
	}
	out := sandbox.Specification{
		Resources: sandbox.Resources{
			CPUMillis:   s.GetCpuMillis(),
			MemoryBytes: s.GetMemoryBytes(),
			DiskBytes:   s.GetDiskBytes(),
		},
		MaxActive:   s.GetMaxActive(),
		MaxRetained: s.GetMaxRetained(),
	}
	sp := s.GetSuspension()
	if sp == nil {
		return out, false, nil
	}
	// A policy that is present must be complete or disabled, never zero:
	// a zero one would read as no choice (the defaults).
	for _, d := range []struct {
		name, bounds string
		v            *durationpb.Duration
	}{{"idle", sandbox.SuspendIdleOutOfBounds, sp.GetIdle()}, {"retention", sandbox.RetentionOutOfBounds, sp.GetRetention()}} {
		f := field + ".suspension." + d.name
		switch {
		case d.v == nil && sp.GetDisabled():
			continue
		case d.v == nil:
			return sandbox.Specification{}, false, errdefs.Invalid(f, "required unless suspension is disabled")
		case d.v.CheckValid() != nil || d.v.AsDuration() <= 0:
			return sandbox.Specification{}, false, errdefs.Invalid(f, d.bounds)
		}
	}
	out.Suspension = sandbox.SuspensionPolicy{Idle: sp.GetIdle().AsDuration(), Retention: sp.GetRetention().AsDuration()}
	return out, sp.GetDisabled(), nil
}

func deploymentProto(d deployment.Deployment) (*adminv1.Deployment, error) {
	pb := &adminv1.Deployment{
		Name:          admin.DeploymentName.Format(),
		Generation:    d.Generation,
		ProviderKind:  d.ProviderKind,
		HasCredential: d.HasCredential,

		ProviderDisabled:    d.ProviderDisabled,
		ProviderDisableTime: admin.Timestamp(&d.ProviderDisabledAt),
		ServingGeneration:   d.ServingGeneration,
		ServingTime:         admin.Timestamp(&d.ServingSince),
	}
	for _, r := range d.Retained {
		pb.RetainedGenerations = append(pb.RetainedGenerations, &adminv1.RetainedGeneration{Generation: r.Generation, Allocations: r.Allocations})
	}
	for _, n := range d.Nodes {
		ng := &adminv1.NodeGenerations{Node: admin.NodeName.Format(n.NodeID.String()), Connected: n.Connected}
		for _, g := range n.Generations {
			ng.Generations = append(ng.Generations, &adminv1.ServedGeneration{Generation: g.Generation, Ready: g.Ready, DiagnosticCode: g.DiagnosticCode})
		}
		pb.Nodes = append(pb.Nodes, ng)
	}
	if d.ProviderKind == "" {
		// Before the first commit: nothing is selected.
		return pb, nil
	}
	var err error
	if pb.Configuration, err = objectProto(d.Public); err != nil {
		return nil, err
	}
	if pb.Observations, err = objectProto(d.Observations); err != nil {
		return nil, err
	}
	spec := d.Specification
	pb.Specification = &adminv1.Specification{
		CpuMillis:   spec.Resources.CPUMillis,
		MemoryBytes: spec.Resources.MemoryBytes,
		DiskBytes:   spec.Resources.DiskBytes,
		MaxActive:   spec.MaxActive,
		MaxRetained: spec.MaxRetained,
	}
	// A deployment always reports its policy: a candidate without one
	// would mean the registered defaults, not what this one holds.
	pb.Specification.Suspension = &adminv1.SuspensionPolicy{Disabled: true}
	if !spec.Suspension.IsZero() {
		pb.Specification.Suspension = &adminv1.SuspensionPolicy{
			Idle:      durationpb.New(spec.Suspension.Idle),
			Retention: durationpb.New(spec.Suspension.Retention),
		}
	}
	pb.CommitTime = admin.Timestamp(&d.CommitTime)
	return pb, nil
}

// objectProto converts an adapter's encoded object; one that does not
// convert is Core's failure (internal), never the caller's.
func objectProto(raw json.RawMessage) (*structpb.Struct, error) {
	s := new(structpb.Struct)
	if len(raw) == 0 {
		return s, nil
	}
	if err := protojson.Unmarshal(raw, s); err != nil {
		return nil, errdefs.ErrContract
	}
	return s, nil
}
