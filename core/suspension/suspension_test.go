package suspension_test

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/events"
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
	svc *suspension.Service
	st  *storetest.Owned
	a   store.Allocation
	// session is the Session of a.
	session uuid.UUID
	bus     *events.Bus
	// phases is subscribed to every Phase event; announced counts the
	// times it was found signalled (wantAnnounced).
	phases    *events.Subscription
	announced int
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
	bus := events.New()
	f := &fixture{st: st, a: a, session: b.Session.ID, bus: bus, phases: bus.Subscribe(events.Any(events.Phase))}
	f.svc = suspension.New(st, bus)
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
// of the fixture's Environment. The bus coalesces, so a test checks after
// every step that may announce (at most one new announcement each).
func (f *fixture) wantAnnounced(t *testing.T, n int) {
	t.Helper()
	select {
	case <-f.phases.Ready():
		f.announced++
	default:
	}
	for _, e := range f.phases.Take() {
		if e.ID != f.a.EnvironmentID {
			t.Fatalf("announced environment %s, want %s", e.ID, f.a.EnvironmentID)
		}
	}
	if f.announced != n {
		t.Fatalf("announced %d transitions, want %d", f.announced, n)
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

// TestRetentionExpiryWakesTheSessionsTurns: an expiry is a terminal
// cleanup like a deletion: whoever waits on the Session (its gateway
// connection) or on a Turn it settled (an output stream) is woken, not
// left to its next poll. Before the bus, Expire announced only the
// Environment's phase and core/turns never heard of the termination.
func TestRetentionExpiryWakesTheSessionsTurns(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	op := uuid.New()
	armed, err := f.svc.Arm(ctx, f.a, op)
	must(t, err)
	must(t, f.svc.QuiesceAcknowledged(ctx, f.a.ID, op))
	claimed, err := f.svc.BeginCapture(ctx, armed, op)
	must(t, err)
	suspended, err := f.svc.Captured(ctx, claimed, op, sandbox.SnapshotIdentity{ID: "snap", Provenance: "test;digest=1"})
	must(t, err)
	script := "true"
	queued, _, err := f.st.SubmitTurn(ctx, store.SubmitTurnParams{
		ID: uuid.New(), SessionID: f.session, RequestID: uuid.New(), RequestDigest: make([]byte, 32),
		ShellScript: &script, WorkingDirectory: "/workspace",
		Input:   store.SealedCredential{Ciphertext: make([]byte, 32), Nonce: make([]byte, 12)},
		Timeout: time.Minute, QueueTimeout: time.Hour, MaxOutputBytes: 10,
	})
	must(t, err)
	// The retention deadline passes by the database clock.
	if _, err := f.st.Pool().Exec(ctx, `UPDATE allocations SET retention_deadline = now() - interval '1 second' WHERE id = $1`, f.a.ID); err != nil {
		t.Fatal(err)
	}
	waiters := f.bus.Subscribe(events.Event{Kind: events.Session, ID: f.session}, events.Event{Kind: events.Turn, ID: queued.ID})
	defer waiters.Close()
	term, err := f.svc.Expire(ctx, suspended)
	must(t, err)
	if len(term.SettledTurns) != 1 || term.SettledTurns[0] != queued.ID {
		t.Fatalf("termination %+v, want the queued Turn settled", term)
	}
	got := waiters.Take()
	if !slices.Contains(got, events.Event{Kind: events.Session, ID: f.session}) ||
		!slices.Contains(got, events.Event{Kind: events.Turn, ID: queued.ID}) {
		t.Fatalf("the expiry woke %v, want its Session and its settled Turn", got)
	}
}
