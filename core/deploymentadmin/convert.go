package deploymentadmin

import (
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/deployment"
	"berth.dev/core/reset"
	"berth.dev/core/store"
)

// maxObjectBytes bounds the JSON of a candidate's configuration and
// credential objects.
const maxObjectBytes = 64 << 10

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
	for _, g := range d.Direct {
		pb.DirectGenerations = append(pb.DirectGenerations, &adminv1.ServedGeneration{Generation: g.Generation, Ready: g.Ready, DiagnosticCode: g.DiagnosticCode})
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

// resetPhases maps the reset phases to the API's.
var resetPhases = map[store.ResetPhase]adminv1.Reset_Phase{
	store.ResetArchiving:  adminv1.Reset_PHASE_ARCHIVING,
	store.ResetDraining:   adminv1.Reset_PHASE_DRAINING,
	store.ResetFinalizing: adminv1.Reset_PHASE_FINALIZING,
	store.ResetDone:       adminv1.Reset_PHASE_DONE,
	store.ResetFailed:     adminv1.Reset_PHASE_FAILED,
}

// resetProto is the API form of a reset and what it waits for.
func resetProto(st reset.Status) *adminv1.Reset {
	r := st.Reset
	out := &adminv1.Reset{
		Name: admin.ResetName.Format(r.ID.String()), Phase: resetPhases[r.Phase],
		RequestTime: timestamppb.New(r.RequestedAt), Deadline: timestamppb.New(r.Deadline),
		Generation: r.Generation, SessionsArchived: r.SessionsArchived, Held: r.Held, HeldOffline: r.HeldOffline,
		EmptyGeneration: r.EmptyGeneration, FailureCode: r.FailureCode, RequestedBy: r.Actor,
	}
	if r.ProgressAt != nil {
		out.ProgressTime = timestamppb.New(*r.ProgressAt)
	}
	if r.EndedAt != nil {
		out.EndTime = timestamppb.New(*r.EndedAt)
	}
	for _, l := range st.Waiting {
		lane := &adminv1.ResetLane{Held: l.Held, Present: l.Present}
		if l.Node != uuid.Nil {
			lane.Node = admin.NodeName.Format(l.Node.String())
		}
		out.Waiting = append(out.Waiting, lane)
	}
	return out
}
