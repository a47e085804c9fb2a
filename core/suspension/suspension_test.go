package suspension_test

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/suspension"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// idle is the deployment's suspension idle time in these tests.
const idle = time.Second

// fixture is a Service over a fresh database with one running Session
// whose one Turn ended more than the idle time ago, and what it announced.
type fixture struct {
	svc       *suspension.Service
	st        *storetest.Owned
	a         store.Allocation
	announced []uuid.UUID
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	st := storetest.Owner(t, storetest.New(t))
	_, err := st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive: 8, MaxRetained: 16, Suspension: sandbox.SuspensionPolicy{Idle: idle, Retention: time.Hour},
		},
	})
	must(t, err)
	b, cred := storetest.RunningSession(t, st)
	endOneTurn(t, st, b, cred)
	time.Sleep(idle + 100*time.Millisecond)
	a, err := st.GetAllocation(ctx, b.Allocation.ID)
	must(t, err)
	f := &fixture{st: st, a: a}
	f.svc = suspension.New(st, func(id uuid.UUID) { f.announced = append(f.announced, id) })
	return f
}

// endOneTurn runs one Turn to its end on a new Runtime connection of b.
func endOneTurn(t *testing.T, st *storetest.Owned, b store.SessionBundle, cred []byte) {
	t.Helper()
	ctx := t.Context()
	script := "true"
	digest, sealed := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(digest)
	_, _ = rand.Read(sealed)
	turn, _, err := st.SubmitTurn(ctx, store.SubmitTurnParams{
		ID: uuid.New(), SessionID: b.Session.ID, RequestID: uuid.New(), RequestDigest: digest,
		ShellScript: &script, WorkingDirectory: "/workspace",
		Input:   store.SealedCredential{Ciphertext: sealed, Nonce: sealed[:12]},
		Timeout: time.Minute, QueueTimeout: time.Minute, MaxOutputBytes: 10,
	})
	must(t, err)
	g, err := st.AcceptRuntime(ctx, store.AcceptRuntimeParams{
		ConnectionID: uuid.New(), DeviceID: b.Allocation.DeviceID, Credential: runtimebootstrap.NewSecret(string(cred)),
	})
	must(t, err)
	_, err = st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	if _, ok, err := st.ClaimNextTurn(ctx, g.Conn); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	code := int32(0)
	_, err = st.FinishTurn(ctx, turn.ID, g.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code})
	must(t, err)
}

// phase checks the allocation's compute phase as recorded.
func (f *fixture) phase(t *testing.T, want store.ComputePhase) store.Allocation {
	t.Helper()
	a, err := f.st.GetAllocation(t.Context(), f.a.ID)
	must(t, err)
	if a.ComputePhase != want {
		t.Fatalf("phase %q, want %q", a.ComputePhase, want)
	}
	return a
}

// wantAnnounced checks how many transitions were announced so far, each
// of the fixture's Environment.
func (f *fixture) wantAnnounced(t *testing.T, n int) {
	t.Helper()
	if len(f.announced) != n {
		t.Fatalf("announced %d transitions, want %d", len(f.announced), n)
	}
	for _, id := range f.announced {
		if id != f.a.EnvironmentID {
			t.Fatalf("announced environment %s, want %s", id, f.a.EnvironmentID)
		}
	}
}

func wantFenced(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrFenced) || errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("%s: %v, want fenced", what, err)
	}
}

// TestAnAcknowledgementThenAnAbortRacesAsBefore: the gateway records the
// Runtime's acknowledgement and the worker then aborts (work arrived):
// the abort wins, is announced, and every later answer to the same
// quiesce (acknowledgement, refusal) and the capture's claim are fenced.
// Only transitions are announced, never the acknowledgement.
func TestAnAcknowledgementThenAnAbortRacesAsBefore(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	op := uuid.New()
	armed, err := f.svc.Arm(ctx, f.a, op)
	must(t, err)
	f.phase(t, store.PhaseQuiescing)
	f.wantAnnounced(t, 1)

	must(t, f.svc.QuiesceAcknowledged(ctx, f.a.ID, op))
	f.wantAnnounced(t, 1)
	_, err = f.svc.Abort(ctx, armed, op)
	must(t, err)
	f.phase(t, store.PhaseRunning)
	f.wantAnnounced(t, 2)

	wantFenced(t, "acknowledgement after the abort", f.svc.QuiesceAcknowledged(ctx, f.a.ID, op))
	wantFenced(t, "refusal after the abort", f.svc.QuiesceRejected(ctx, f.a.ID, op))
	_, err = f.svc.BeginCapture(ctx, armed, op)
	wantFenced(t, "capture claim after the abort", err)
	f.phase(t, store.PhaseRunning)
	f.wantAnnounced(t, 3) // the refused claim is announced: admission reopens
}

// TestAStaleOperationIsFenced: answers and outcomes of another operation
// than the armed one change nothing; the armed one then completes a
// capture, recorded once.
func TestAStaleOperationIsFenced(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	op, stale := uuid.New(), uuid.New()
	armed, err := f.svc.Arm(ctx, f.a, op)
	must(t, err)
	_, err = f.svc.Arm(ctx, f.a, stale)
	wantFenced(t, "arming at a stale revision", err)

	wantFenced(t, "acknowledgement of a stale operation", f.svc.QuiesceAcknowledged(ctx, f.a.ID, stale))
	wantFenced(t, "refusal of a stale operation", f.svc.QuiesceRejected(ctx, f.a.ID, stale))
	_, err = f.svc.Abort(ctx, armed, stale)
	wantFenced(t, "abort of a stale operation", err)
	f.phase(t, store.PhaseQuiescing)
	f.wantAnnounced(t, 1)

	must(t, f.svc.QuiesceAcknowledged(ctx, f.a.ID, op))
	_, err = f.svc.BeginCapture(ctx, armed, stale)
	wantFenced(t, "capture claim of a stale operation", err)
	claimed, err := f.svc.BeginCapture(ctx, armed, op)
	must(t, err)
	f.phase(t, store.PhaseSuspending)
	snap := sandbox.SnapshotIdentity{ID: "snap-" + op.String(), Provenance: "test;digest=1"}
	_, err = f.svc.Captured(ctx, claimed, stale, snap)
	wantFenced(t, "record of a stale capture", err)
	_, err = f.svc.Captured(ctx, claimed, op, snap)
	must(t, err)
	f.phase(t, store.PhaseSuspended)
	_, err = f.svc.Captured(ctx, claimed, op, snap)
	wantFenced(t, "a second record of the capture", err)
	_, err = f.svc.RolledBack(ctx, claimed, op, "", nil)
	wantFenced(t, "a rollback after the record", err)
	f.phase(t, store.PhaseSuspended)
}
