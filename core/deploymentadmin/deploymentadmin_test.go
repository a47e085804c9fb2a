package deploymentadmin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/deployment/deploymenttest"
	"berth.dev/core/deploymentadmin"
	"berth.dev/core/events"
	"berth.dev/core/reset"
	"berth.dev/core/store"
)

func specProto() *adminv1.Specification {
	s := deploymenttest.DefaultSpec()
	return &adminv1.Specification{
		CpuMillis:   s.Resources.CPUMillis,
		MemoryBytes: s.Resources.MemoryBytes,
		DiskBytes:   s.Resources.DiskBytes,
		MaxActive:   s.MaxActive,
		MaxRetained: s.MaxRetained,
	}
}

func object(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	errdefstest.Must(t, err)
	return s
}

func TestGRPCPreviewCommitGet(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)

	got, err := c.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	if d := got.GetDeployment(); d.GetName() != "deployment" || d.GetGeneration() != 0 || d.GetProviderKind() != "" {
		t.Fatalf("deployment before the first commit: %v", d)
	}

	cand := &adminv1.DeploymentCandidate{ProviderKind: "docker", Configuration: object(t, nil), Specification: specProto()}
	pv, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: cand})
	errdefstest.Must(t, err)
	if !pv.GetChanged() || pv.GetExpectedGeneration() != 0 || pv.GetDeployment().GetGeneration() != 1 ||
		pv.GetDeployment().GetProviderKind() != "docker" || len(pv.GetDeployment().GetConfiguration().GetFields()) != 0 ||
		pv.GetDeployment().GetCommitTime() != nil || pv.GetDeployment().GetSpecification().GetMaxActive() != 4 {
		t.Fatalf("preview %v", pv)
	}

	cm, err := c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: cand, ExpectedGeneration: pv.GetExpectedGeneration()})
	errdefstest.Must(t, err)
	if d := cm.GetDeployment(); d.GetGeneration() != 1 || d.GetCommitTime() == nil || d.GetHasCredential() ||
		d.GetSpecification().GetSuspension().GetIdle().AsDuration() != 15*time.Minute {
		t.Fatalf("commit %v", d)
	}

	got, err = c.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	if d := got.GetDeployment(); d.GetGeneration() != 1 || d.GetProviderKind() != "docker" ||
		d.GetSpecification().GetCpuMillis() != 1000 || !d.GetCommitTime().AsTime().Equal(cm.GetDeployment().GetCommitTime().AsTime()) {
		t.Fatalf("get %v", d)
	}

	// A retry with the stale expectation is refused and writes nothing.
	_, err = c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: cand, ExpectedGeneration: 0})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "deployment_generation_moved")
	f.WantGenerations(t, 1, "after the stale retry")

	// The same candidate at the current generation changes nothing; a
	// changed specification is refused and writes nothing: a committed
	// deployment is replaced with ReplaceDeployment.
	same, err := c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: cand, ExpectedGeneration: 1})
	errdefstest.Must(t, err)
	if same.GetDeployment().GetGeneration() != 1 {
		t.Fatalf("equal commit %v", same.GetDeployment())
	}
	bigger := &adminv1.DeploymentCandidate{ProviderKind: "docker", Configuration: object(t, nil), Specification: specProto()}
	bigger.Specification.MaxActive++
	_, err = c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: bigger, ExpectedGeneration: 1})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "deployment_committed")
	f.WantGenerations(t, 1, "after the refused replacement")

	_, err = c.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployments"})
	admintest.WantInvalidField(t, err, "name")
}

func TestGRPCRejectsInvalidCandidates(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	with := func(mutate func(*adminv1.DeploymentCandidate)) *adminv1.DeploymentCandidate {
		cand := &adminv1.DeploymentCandidate{ProviderKind: "docker", Specification: specProto()}
		mutate(cand)
		return cand
	}
	cases := []struct {
		cand  *adminv1.DeploymentCandidate
		field string
	}{
		{nil, "candidate"},
		{with(func(c *adminv1.DeploymentCandidate) { c.ProviderKind = "nope" }), "candidate.provider_kind"},
		{with(func(c *adminv1.DeploymentCandidate) { c.Specification = nil }), "candidate.specification"},
		{with(func(c *adminv1.DeploymentCandidate) { c.Specification.CpuMillis = 1 }), "candidate.specification.cpu_millis"},
		{with(func(c *adminv1.DeploymentCandidate) { c.Specification.MaxActive = 5000 }), "candidate.specification.max_active"},
		{with(func(c *adminv1.DeploymentCandidate) {
			c.Specification.Suspension = &adminv1.SuspensionPolicy{Idle: durationpb.New(time.Hour)}
		}), "candidate.specification.suspension.retention"},
		{with(func(c *adminv1.DeploymentCandidate) {
			c.Specification.Suspension = &adminv1.SuspensionPolicy{Idle: durationpb.New(time.Second), Retention: durationpb.New(2 * time.Hour)}
		}), "candidate.specification.suspension.idle"},
		{with(func(c *adminv1.DeploymentCandidate) {
			c.Configuration = object(t, map[string]any{"socket": "/var/run/docker.sock"})
		}), "candidate.configuration"},
		{with(func(c *adminv1.DeploymentCandidate) {
			c.Credential = object(t, map[string]any{"token": "s3cret-value"})
		}), "candidate.credential"},
		// Nested one level past admin.MaxStructDepth: refused by validation
		// on the field (the codec's recursion limit lets it through).
		{with(func(c *adminv1.DeploymentCandidate) { c.Configuration = nested(admin.MaxStructDepth+1, false) }), "candidate.configuration"},
		{with(func(c *adminv1.DeploymentCandidate) { c.Configuration = nested(admin.MaxStructDepth+1, true) }), "candidate.configuration"},
		{with(func(c *adminv1.DeploymentCandidate) { c.Credential = nested(admin.MaxStructDepth+1, false) }), "candidate.credential"},
	}
	for _, tc := range cases {
		_, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: tc.cand})
		admintest.WantInvalidField(t, err, tc.field)
		_, err = c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: tc.cand})
		admintest.WantInvalidField(t, err, tc.field)
		if strings.Contains(err.Error(), "s3cret-value") {
			t.Fatalf("status echoes the credential: %v", err)
		}
	}
	f.WantGenerations(t, 0, "after rejected candidates")
}

func TestGRPCCredentialIsWriteOnly(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	const token = "tok-s3cret-grpc"
	cand := &adminv1.DeploymentCandidate{
		ProviderKind:  deploymenttest.DirectKind,
		Configuration: object(t, map[string]any{"region": "eu"}),
		Credential:    object(t, map[string]any{"token": token}),
		Specification: specProto(),
	}
	pv, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: cand})
	errdefstest.Must(t, err)
	cm, err := c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: cand})
	errdefstest.Must(t, err)
	got, err := c.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	for _, d := range []*adminv1.Deployment{pv.GetDeployment(), cm.GetDeployment(), got.GetDeployment()} {
		if !d.GetHasCredential() || d.GetConfiguration().GetFields()["region"].GetStringValue() != "eu" ||
			d.GetObservations().GetFields()["zone_count"].GetNumberValue() != 3 {
			t.Fatalf("deployment %v", d)
		}
		b, err := protojson.Marshal(d)
		errdefstest.Must(t, err)
		if strings.Contains(string(b), token) {
			t.Fatalf("a response carries the credential")
		}
	}
	// Another credential for the same selection is refused, without the
	// credential in the answer.
	other := &adminv1.DeploymentCandidate{
		ProviderKind:  deploymenttest.DirectKind,
		Configuration: object(t, map[string]any{"region": "eu"}),
		Credential:    object(t, map[string]any{"token": "tok-other-s3cret"}),
		Specification: specProto(),
	}
	_, err = c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: other, ExpectedGeneration: 1})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "deployment_credential_replacement_unsupported")
	if strings.Contains(err.Error(), "tok-other-s3cret") || f.Generations(t) != 1 {
		t.Fatalf("refused credential replacement: %v", err)
	}

	// Without the admin token nothing is served.
	_, err = c.GetDeployment(f.Ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	admintest.WantStatus(t, err, codes.Unauthenticated, admin.ReasonUnauthenticated)
}

// client is a real gRPC client of an admin server that serves f's
// DeploymentService on a loopback port.
type client struct {
	adminv1.DeploymentServiceClient
	token string
}

func serve(t *testing.T, f deploymenttest.Fixture) client {
	t.Helper()
	resets, err := reset.NewService(resetView{f.St.Store.Reader, f.St.Owner}, events.New(), uuid.New, 0)
	if err != nil {
		t.Fatal(err)
	}
	cc, token := admintest.Serve(t, admin.Options{Services: []admin.Service{deploymentadmin.New(f.Svc, resets)}})
	return client{DeploymentServiceClient: adminv1.NewDeploymentServiceClient(cc), token: token}
}

// authed returns ctx carrying the admin bearer token.
func (c client) authed(ctx context.Context) context.Context { return admintest.Authed(ctx, c.token) }

func TestGRPCDisableAndEnableProvider(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	_, err := c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "docker", Specification: specProto(),
	}})
	errdefstest.Must(t, err)

	// The resource name is checked first.
	_, err = c.DisableProvider(ctx, &adminv1.DisableProviderRequest{Name: "deployments/1"})
	admintest.WantInvalidField(t, err, "name")
	_, err = c.EnableProvider(ctx, &adminv1.EnableProviderRequest{})
	admintest.WantInvalidField(t, err, "name")
	got, err := c.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	if got.GetDeployment().GetProviderDisabled() || got.GetDeployment().GetProviderDisableTime() != nil {
		t.Fatalf("a refused request changed the switch: %v", got.GetDeployment())
	}

	dis, err := c.DisableProvider(ctx, &adminv1.DisableProviderRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	d := dis.GetDeployment()
	if !d.GetProviderDisabled() || d.GetProviderDisableTime() == nil || d.GetGeneration() != 1 || d.GetProviderKind() != "docker" {
		t.Fatalf("disabled %v", d)
	}
	got, err = c.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	if !got.GetDeployment().GetProviderDisabled() {
		t.Fatalf("read after disable %v", got.GetDeployment())
	}
	en, err := c.EnableProvider(ctx, &adminv1.EnableProviderRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	if en.GetDeployment().GetProviderDisabled() || en.GetDeployment().GetProviderDisableTime() != nil {
		t.Fatalf("enabled %v", en.GetDeployment())
	}
	// Without the admin token nothing is changed.
	_, err = c.DisableProvider(f.Ctx, &adminv1.DisableProviderRequest{Name: "deployment"})
	admintest.WantStatus(t, err, codes.Unauthenticated, admin.ReasonUnauthenticated)

	// Each change is a decision by the administrator (audit.From of the
	// call), read back from the trail.
	far := time.Now().Add(time.Hour)
	events, err := f.St.ListAuditEvents(f.Ctx, store.AuditFilter{ActionPrefix: "provider.", End: &far}, store.AuditCursor{}, 10)
	errdefstest.Must(t, err)
	if len(events) != 2 || events[0].Action != "provider.disable" || events[1].Action != "provider.enable" {
		t.Fatalf("provider events %+v", events)
	}
	for _, e := range events {
		if e.Kind != store.AuditDecision || e.Actor() != "admin" || e.RequestID == uuid.Nil || e.Resource != "deployment" {
			t.Fatalf("provider event %+v", e)
		}
	}
}

// nested is a Struct depth levels deep: objects ({"a": {"a": ...}}), or,
// with lists, an object holding lists ({"a": [[...]]}).
func nested(depth int, lists bool) *structpb.Struct {
	v := structpb.NewStringValue("leaf")
	for range depth - 1 {
		if lists {
			v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		} else {
			v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": v}})
		}
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{"a": v}}
}

// TestGRPCAcceptsStructsAtTheDepthBound: a configuration nested exactly
// admin.MaxStructDepth deep passes the depth rule (and the codec's
// recursion limit); only the provider's own validation judges it.
func TestGRPCAcceptsStructsAtTheDepthBound(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	for _, lists := range []bool{false, true} {
		cand := &adminv1.DeploymentCandidate{ProviderKind: "docker", Specification: specProto(), Configuration: nested(admin.MaxStructDepth, lists)}
		_, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: cand})
		if f := admintest.Field(err); f == "request" || strings.Contains(fmt.Sprint(err), "nested deeper") {
			t.Fatalf("lists=%v: a Struct at the bound was refused for its depth: %v", lists, err)
		}
	}
}

// TestGRPCReplaceWithUpdateMask: a replacement that names only
// specification.memory_bytes in its update_mask inherits everything else;
// the preview with the same mask shows it; the response reports the
// admission pause and no retired node; GetDeployment shows the retained
// generations; an unknown mask path is INVALID_ARGUMENT on update_mask, a
// stale expected generation FAILED_PRECONDITION, and neither writes.
func TestGRPCReplaceWithUpdateMask(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	cand := &adminv1.DeploymentCandidate{ProviderKind: "docker", Configuration: object(t, nil), Specification: specProto()}
	_, err := c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: cand})
	errdefstest.Must(t, err)

	mask := &fieldmaskpb.FieldMask{Paths: []string{"specification.memory_bytes"}}
	partial := &adminv1.DeploymentCandidate{Specification: &adminv1.Specification{MemoryBytes: 2 << 30}}
	pv, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: partial, UpdateMask: mask})
	errdefstest.Must(t, err)
	if s := pv.GetDeployment().GetSpecification(); !pv.GetChanged() || pv.GetExpectedGeneration() != 1 || s.GetMemoryBytes() != 2<<30 ||
		s.GetCpuMillis() != specProto().GetCpuMillis() || s.GetMaxActive() != specProto().GetMaxActive() || pv.GetDeployment().GetProviderKind() != "docker" {
		t.Fatalf("preview %v", pv)
	}
	_, err = c.ReplaceDeployment(ctx, &adminv1.ReplaceDeploymentRequest{Candidate: partial, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"specification.gpus"}}, ExpectedGeneration: 1})
	admintest.WantInvalidField(t, err, "update_mask")
	_, err = c.ReplaceDeployment(ctx, &adminv1.ReplaceDeploymentRequest{Candidate: partial, UpdateMask: mask, ExpectedGeneration: 0})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "deployment_generation_moved")
	f.WantGenerations(t, 1, "after the refused replacements")

	r, err := c.ReplaceDeployment(ctx, &adminv1.ReplaceDeploymentRequest{Candidate: partial, UpdateMask: mask, ExpectedGeneration: 1})
	errdefstest.Must(t, err)
	if d := r.GetDeployment(); !r.GetChanged() || d.GetGeneration() != 2 || d.GetSpecification().GetMemoryBytes() != 2<<30 ||
		d.GetSpecification().GetDiskBytes() != specProto().GetDiskBytes() || len(r.GetRetiredNodes()) != 0 || r.GetAdmissionPause() == nil {
		t.Fatalf("replacement %v", r)
	}
	got, err := c.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	if d := got.GetDeployment(); d.GetGeneration() != 2 || d.GetServingGeneration() != 0 || len(d.GetRetainedGenerations()) != 0 {
		t.Fatalf("deployment after the replacement %v", d)
	}
	// The one replacement that committed is the administrator's decision
	// in the trail; the refused ones recorded nothing.
	far := time.Now().Add(time.Hour)
	events, err := f.St.ListAuditEvents(f.Ctx, store.AuditFilter{ActionPrefix: "deployment.", End: &far}, store.AuditCursor{}, 10)
	errdefstest.Must(t, err)
	if len(events) != 1 || events[0].Action != "deployment.replace" || events[0].Actor() != "admin" || events[0].RequestID == uuid.Nil ||
		events[0].Detail["from_generation"] != float64(1) || events[0].Detail["to_generation"] != float64(2) ||
		events[0].Detail["to_provider_kind"] != "docker" || events[0].Detail["nodes_retired"] != float64(0) {
		t.Fatalf("replacement events %+v", events)
	}
}

// TestGRPCPreviewShowsRegisteredSuspensionDefaults: PreviewDeployment of
// a candidate without a suspension policy shows the provider's registered
// defaults (Docker: 900 s idle, 7 days' retention).
func TestGRPCPreviewShowsRegisteredSuspensionDefaults(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	pv, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{ProviderKind: "docker", Specification: specProto()}})
	errdefstest.Must(t, err)
	if p := pv.GetDeployment().GetSpecification().GetSuspension(); p.GetIdle().AsDuration() != 15*time.Minute ||
		p.GetRetention().AsDuration() != 7*24*time.Hour {
		t.Fatalf("previewed suspension %v, want the registered defaults (15m idle, 168h retention)", p)
	}
}

// TestGRPCSuspensionBoundsInRefusals: a suspension policy out of the
// shared bounds is refused on its field, and the refusal says the bounds.
func TestGRPCSuspensionBoundsInRefusals(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	for _, tc := range []struct {
		field           string
		idle, retention time.Duration
		bounds          []string
	}{
		{"idle", 30 * time.Second, time.Hour, []string{"at least 1 minute", "at most 24 hours"}},
		{"idle", 25 * time.Hour, time.Hour, []string{"at least 1 minute", "at most 24 hours"}},
		{"retention", time.Hour, 30 * time.Minute, []string{"at least 1 hour", "at most 90 days"}},
	} {
		spec := specProto()
		spec.Suspension = &adminv1.SuspensionPolicy{Idle: durationpb.New(tc.idle), Retention: durationpb.New(tc.retention)}
		_, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{ProviderKind: "docker", Specification: spec}})
		admintest.WantInvalidField(t, err, "candidate.specification.suspension."+tc.field)
		s, _ := status.FromError(err)
		for _, b := range tc.bounds {
			if !strings.Contains(s.Message(), b) {
				t.Fatalf("%s %v: message %q does not say %q", tc.field, spec.Suspension, s.Message(), b)
			}
		}
	}
}

// TestGRPCSuspensionDisabled: a candidate whose policy is disabled commits
// a deployment that suspends nothing, reported as disabled (never as an
// absent policy, which in a candidate means the defaults), so the
// reported specification committed again is the same deployment; disabled
// with a duration is refused on the policy.
func TestGRPCSuspensionDisabled(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	spec := specProto()
	spec.Suspension = &adminv1.SuspensionPolicy{Disabled: true, Idle: durationpb.New(time.Hour)}
	_, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{ProviderKind: "docker", Specification: spec}})
	admintest.WantInvalidField(t, err, "candidate.specification.suspension")

	spec.Suspension = &adminv1.SuspensionPolicy{Disabled: true}
	cand := &adminv1.DeploymentCandidate{ProviderKind: "docker", Specification: spec}
	pv, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: cand})
	errdefstest.Must(t, err)
	if p := pv.GetDeployment().GetSpecification().GetSuspension(); !p.GetDisabled() || p.GetIdle() != nil || p.GetRetention() != nil {
		t.Fatalf("previewed suspension %v, want disabled", p)
	}
	cm, err := c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: cand})
	errdefstest.Must(t, err)
	g, err := f.St.GetGeneration(f.Ctx, 1)
	errdefstest.Must(t, err)
	if !cm.GetDeployment().GetSpecification().GetSuspension().GetDisabled() || !g.Specification.Suspension.IsZero() {
		t.Fatalf("committed %v, stored %+v", cm.GetDeployment().GetSpecification(), g.Specification.Suspension)
	}
	got, err := c.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	errdefstest.Must(t, err)
	again, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "docker", Specification: got.GetDeployment().GetSpecification(),
	}})
	errdefstest.Must(t, err)
	if again.GetChanged() {
		t.Fatalf("the reported specification previewed as a change: %v", again.GetDeployment().GetSpecification())
	}
	// Leaving the policy out is another deployment: the defaults.
	defaults, err := c.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{ProviderKind: "docker", Specification: specProto()}})
	errdefstest.Must(t, err)
	if !defaults.GetChanged() || defaults.GetDeployment().GetSpecification().GetSuspension().GetDisabled() {
		t.Fatalf("a candidate without a policy against suspension off: %v", defaults)
	}
}

// resetView is the owner's store as the daemon gives it to reset.Service.
type resetView struct {
	*store.Reader
	*store.Owner
}

// TestGRPCReset: StartReset validates its request id and timeout (5 min
// to 24 h) before anything is written; a reset starts archiving, bound
// to the committed generation, and fences the deployment (CommitDeployment
// is refused deployment_resetting); a second reset is reset_in_progress
// and the same request returns the first; GetReset reads it by name or as
// "resets/-", with what each lane holds; a malformed name is refused.
func TestGRPCReset(t *testing.T) {
	f := deploymenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	_, err := c.GetReset(ctx, &adminv1.GetResetRequest{Name: "resets/-"})
	admintest.WantStatus(t, err, codes.NotFound, "not_found")
	_, err = c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "docker", Specification: specProto(),
	}})
	errdefstest.Must(t, err)

	_, err = c.StartReset(ctx, &adminv1.StartResetRequest{RequestId: "x"})
	admintest.WantInvalidField(t, err, "request_id")
	req := uuid.NewString()
	_, err = c.StartReset(ctx, &adminv1.StartResetRequest{RequestId: req, Timeout: durationpb.New(time.Minute)})
	admintest.WantInvalidField(t, err, "timeout")
	_, err = c.StartReset(ctx, &adminv1.StartResetRequest{RequestId: req, Timeout: durationpb.New(25 * time.Hour)})
	admintest.WantInvalidField(t, err, "timeout")
	if _, err := c.GetReset(ctx, &adminv1.GetResetRequest{Name: "resets/-"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused start wrote a reset: %v", err)
	}

	started, err := c.StartReset(ctx, &adminv1.StartResetRequest{RequestId: req, Timeout: durationpb.New(2 * time.Hour)})
	errdefstest.Must(t, err)
	r := started.GetDeploymentReset()
	if r.GetPhase() != adminv1.Reset_PHASE_ARCHIVING || r.GetGeneration() != 1 || r.GetRequestedBy() != "admin" ||
		r.GetDeadline().AsTime().Sub(r.GetRequestTime().AsTime()) != 2*time.Hour || !strings.HasPrefix(r.GetName(), "resets/") {
		t.Fatalf("started %v", r)
	}
	again, err := c.StartReset(ctx, &adminv1.StartResetRequest{RequestId: req})
	errdefstest.Must(t, err)
	if again.GetDeploymentReset().GetName() != r.GetName() {
		t.Fatalf("a retry started %s, want %s", again.GetDeploymentReset().GetName(), r.GetName())
	}
	_, err = c.StartReset(ctx, &adminv1.StartResetRequest{RequestId: uuid.NewString()})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "reset_in_progress")
	_, err = c.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{ExpectedGeneration: 1, Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "docker", Specification: specProto(),
	}})
	if err != nil {
		t.Fatalf("an unchanged commit during a reset writes nothing and is answered: %v", err)
	}
	_, err = c.DisableProvider(ctx, &adminv1.DisableProviderRequest{Name: "deployment"})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "deployment_resetting")

	for _, name := range []string{r.GetName(), "resets/-"} {
		got, err := c.GetReset(ctx, &adminv1.GetResetRequest{Name: name})
		errdefstest.Must(t, err)
		if got.GetDeploymentReset().GetName() != r.GetName() || got.GetDeploymentReset().GetWaiting() != nil {
			t.Fatalf("GetReset(%s) %v", name, got.GetDeploymentReset())
		}
	}
	_, err = c.GetReset(ctx, &adminv1.GetResetRequest{Name: "resets/latest"})
	admintest.WantInvalidField(t, err, "name")
	_, err = c.GetReset(ctx, &adminv1.GetResetRequest{Name: "resets/" + uuid.NewString()})
	admintest.WantStatus(t, err, codes.NotFound, "not_found")
}
