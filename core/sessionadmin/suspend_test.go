package sessionadmin_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin/admintest"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestGRPCSuspendAndResumeSession: the requests name their invalid
// fields, refuse with fixed reasons (not running yet, no suspension
// policy, a Turn queued), are idempotent by request id, and report the
// compute phase.
func TestGRPCSuspendAndResumeSession(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 4) // no suspension policy
	c := f.serve(t)
	ctx := c.authed(f.Ctx)
	r, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	name := r.GetSession().GetName()

	for field, req := range map[string]*adminv1.SuspendSessionRequest{
		"name":       {Name: "sessions/x", RequestId: uuid.NewString()},
		"request_id": {Name: name, RequestId: "again"},
	} {
		_, err := c.SuspendSession(ctx, req)
		t.Run(field, func(t *testing.T) { admintest.WantInvalidField(t, err, field) })
	}
	_, err = c.ResumeSession(ctx, &adminv1.ResumeSessionRequest{Name: name})
	admintest.WantInvalidField(t, err, "request_id")
	_, err = c.SuspendSession(ctx, &adminv1.SuspendSessionRequest{Name: "sessions/" + uuid.NewString(), RequestId: uuid.NewString()})
	admintest.WantStatus(t, err, codes.NotFound, "not_found")

	// Provisioning: nothing to suspend yet.
	_, err = c.SuspendSession(ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "compute_not_running")

	b, err := f.Svc.Get(f.Ctx, projects.All(), uuid.MustParse(name[len("sessions/"):]))
	errdefstest.Must(t, err)
	a, err := f.St.ClaimCreate(f.Ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	errdefstest.Must(t, err)
	_, err = f.St.RecordCreateOutcome(f.Ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "p", BootstrapComplete: true})
	errdefstest.Must(t, err)

	// Running, but the deployment suspends nothing.
	_, err = c.SuspendSession(ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "suspension_not_configured")

	// Resuming running compute changes nothing, and says so.
	res, err := c.ResumeSession(ctx, &adminv1.ResumeSessionRequest{Name: name, RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	if p := res.GetSession().GetEnvironment().GetComputePhase(); p != adminv1.ComputePhase_COMPUTE_PHASE_RUNNING {
		t.Fatalf("phase %v", p)
	}
}

// TestGRPCSuspendSessionBeforeAnyTurnEnded: a running Session under a
// suspension policy that has not finished a Turn is refused
// (FAILED_PRECONDITION no_turn_ended) with a message that says what to
// wait for, and nothing is requested: its compute keeps running.
func TestGRPCSuspendSessionBeforeAnyTurnEnded(t *testing.T) {
	f := newFixture(t)
	_, err := f.St.CommitGeneration(f.Ctx, storetest.Seen(t, f.St), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive: 4, MaxRetained: 4,
			Suspension: sandbox.SuspensionPolicy{Idle: time.Minute, Retention: time.Hour},
		},
	})
	errdefstest.Must(t, err)
	c := f.serve(t)
	ctx := c.authed(f.Ctx)
	r, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	name := r.GetSession().GetName()
	b, err := f.Svc.Get(f.Ctx, projects.All(), uuid.MustParse(name[len("sessions/"):]))
	errdefstest.Must(t, err)
	a, err := f.St.ClaimCreate(f.Ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	errdefstest.Must(t, err)
	_, err = f.St.RecordCreateOutcome(f.Ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "p", BootstrapComplete: true})
	errdefstest.Must(t, err)

	_, err = c.SuspendSession(ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()})
	s := admintest.WantStatus(t, err, codes.FailedPrecondition, "no_turn_ended")
	if !strings.Contains(s.Message(), "after its first turn ends") {
		t.Fatalf("message %q does not say what to wait for", s.Message())
	}
	got, err := f.St.GetAllocation(f.Ctx, a.ID)
	errdefstest.Must(t, err)
	if got.ComputePhase != store.PhaseRunning || got.Suspension.RequestedAt != nil {
		t.Fatalf("after the refusal: phase %s, requested %v", got.ComputePhase, got.Suspension.RequestedAt)
	}
}
