package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

// snapshot is every row terminal cleanup may touch, as JSON text, so a
// comparison shows whether anything changed at all.
func snapshot(t *testing.T, ctx context.Context, st *storetest.Store) string {
	t.Helper()
	var out string
	err := st.Pool().QueryRow(ctx, `
SELECT concat_ws(E'\n',
  (SELECT json_agg(x ORDER BY x.id)::text FROM sessions x),
  (SELECT json_agg(x ORDER BY x.id)::text FROM environments x),
  (SELECT json_agg(x ORDER BY x.environment_id)::text FROM placements x),
  (SELECT json_agg(x ORDER BY x.id)::text FROM allocations x),
  (SELECT json_agg(x ORDER BY x.id)::text FROM runtime_connections x),
  (SELECT json_agg(x ORDER BY x.seq)::text FROM turns x))`).Scan(&out)
	must(t, err)
	return out
}

// terminalFixture is a running Session with a prepared Runtime
// connection, one running Turn, one queued Turn and one queued Turn whose
// queue deadline has passed.
type terminalFixture struct {
	b                        store.SessionBundle
	cred                     []byte
	conn                     store.RuntimeConn
	running, queued, overdue uuid.UUID
}

func newTerminalFixture(t *testing.T, ctx context.Context, st *storetest.Owned) terminalFixture {
	t.Helper()
	b, cred := storetest.RunningSession(t, st)
	g := accept(t, ctx, st, b, cred, st.Epoch())
	_, err := st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	f := terminalFixture{b: b, cred: cred, conn: g.Conn}
	run := turnParams(t, b.Session.ID, "run")
	_, _, err = st.SubmitTurn(ctx, run)
	must(t, err)
	claimed, ok, err := st.ClaimNextTurn(ctx, g.Conn)
	must(t, err)
	if !ok || claimed.ID != run.ID {
		t.Fatalf("claimed %v, %v", claimed.ID, ok)
	}
	queued := turnParams(t, b.Session.ID, "queued")
	_, _, err = st.SubmitTurn(ctx, queued)
	must(t, err)
	overdue := turnParams(t, b.Session.ID, "overdue")
	overdue.QueueTimeout = time.Millisecond
	_, _, err = st.SubmitTurn(ctx, overdue)
	must(t, err)
	time.Sleep(20 * time.Millisecond)
	f.running, f.queued, f.overdue = run.ID, queued.ID, overdue.ID
	return f
}

func (f terminalFixture) acceptParams(t *testing.T) store.AcceptRuntimeParams {
	return store.AcceptRuntimeParams{
		ConnectionID: newUUID(t), DeviceID: f.b.Allocation.DeviceID,
		Credential: runtimebootstrap.NewSecret(string(f.cred)),
	}
}

func wantTurn(t *testing.T, ctx context.Context, st *storetest.Owned, id uuid.UUID, state store.TurnState, code string) store.Turn {
	t.Helper()
	got, err := st.GetTurn(ctx, id)
	must(t, err)
	if got.State != state || got.FailureCode != code {
		t.Fatalf("turn = %s %q, want %s %q", got.State, got.FailureCode, state, code)
	}
	return got
}

func TestSessionDeletionIsOneTerminalCleanup(t *testing.T) {
	st, ctx, epoch := owner(t)
	f := newTerminalFixture(t, ctx, st)
	before := snapshot(t, ctx, st.Store)

	// A Core whose lease another epoch took over writes nothing.
	standby, err := st.NextOwnerEpoch(ctx)
	must(t, err)
	_, err = st.AsOwner(standby).RequestSessionDeletion(ctx, f.b.Session.ID)
	wantClass(t, err, store.ErrSuperseded)
	if got := snapshot(t, ctx, st.Store); got != before {
		t.Fatalf("a fenced deletion changed rows:\n%s\nwant\n%s", got, before)
	}

	// A failure at the last step (the cleanup request, here a constraint a
	// trigger raises) leaves none of the earlier steps either.
	_, err = st.Pool().Exec(ctx, `
CREATE FUNCTION refuse_cleanup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'injected' USING ERRCODE = 'check_violation', CONSTRAINT = 'injected';
END;
$$;
CREATE TRIGGER refuse_cleanup BEFORE UPDATE ON allocations FOR EACH ROW
    WHEN (NEW.state = 'cleanup_requested' AND OLD.state <> 'cleanup_requested')
    EXECUTE FUNCTION refuse_cleanup();`)
	must(t, err)
	_, err = st.RequestSessionDeletion(ctx, f.b.Session.ID)
	if err == nil {
		t.Fatal("deletion succeeded despite the injected failure")
	}
	if got := snapshot(t, ctx, st.Store); got != before {
		t.Fatalf("a failed deletion changed rows:\n%s\nwant\n%s", got, before)
	}
	// The device still authenticates: nothing was revoked.
	g2, err := st.AcceptRuntime(ctx, f.acceptParams(t))
	must(t, err)
	_, err = st.Pool().Exec(ctx, `DROP TRIGGER refuse_cleanup ON allocations`)
	must(t, err)
	// The reconnect made the running Turn unconfirmed; run a new one on the
	// new connection.
	_, err = st.MarkRuntimePrepared(ctx, g2.Conn)
	must(t, err)
	wantTurn(t, ctx, st, f.running, store.TurnUnconfirmed, "runtime_disconnected")
	rerun := turnParams(t, f.b.Session.ID, "rerun")
	_, _, err = st.SubmitTurn(ctx, rerun)
	must(t, err)
	// queued is first in line; it runs now, rerun stays queued.
	claimed, ok, err := st.ClaimNextTurn(ctx, g2.Conn)
	must(t, err)
	if !ok || claimed.ID != f.queued {
		t.Fatalf("claimed %v %v, want %v", claimed.ID, ok, f.queued)
	}

	b, term, err := st.DeleteSession(ctx, f.b.Session.ID)
	must(t, err)
	if b.Session.State != store.SessionDeleteRequested {
		t.Fatalf("session = %s", b.Session.State)
	}
	if b.Environment.TerminalCause != store.TerminalDeleted || b.Environment.TerminatedAt == nil {
		t.Fatalf("environment = %+v", b.Environment)
	}
	if b.Allocation.State != store.AllocationCleanupRequested || b.Allocation.DeviceRevokedAt == nil {
		t.Fatalf("allocation = %s revoked %v", b.Allocation.State, b.Allocation.DeviceRevokedAt)
	}
	if term.Revoked != f.b.Allocation.ID || term.Cleanup.ID != f.b.Allocation.ID ||
		len(term.SettledTurns) != 2 || len(term.CancelRequested) != 1 || term.CancelRequested[0] != f.queued {
		t.Fatalf("termination = %+v", term)
	}
	// Pending input ends with the fixed code; an overdue Turn keeps the
	// meaning of its deadline.
	wantTurn(t, ctx, st, rerun.ID, store.TurnFailed, store.TurnFailureSessionDeleted)
	wantTurn(t, ctx, st, f.overdue, store.TurnFailed, "runtime_not_ready")
	// The running Turn is asked to cancel, keeps running, and its result
	// still counts.
	running := wantTurn(t, ctx, st, f.queued, store.TurnRunning, "")
	if running.CancelRequestedAt == nil {
		t.Fatal("running turn has no cancel request")
	}
	// The device is refused from now on.
	_, err = st.AcceptRuntime(ctx, f.acceptParams(t))
	wantClass(t, err, store.ErrRuntimeRevoked)
	if _, err := st.FinishTurn(ctx, f.queued, g2.Conn, store.TurnResult{State: store.TurnCancelled}); err != nil {
		t.Fatalf("result of the cancelled turn: %v", err)
	}
	wantTurn(t, ctx, st, f.queued, store.TurnCancelled, "")

	// Again: nothing changes.
	mid := snapshot(t, ctx, st.Store)
	_, err = st.AsOwner(epoch).RequestSessionDeletion(ctx, f.b.Session.ID)
	must(t, err)
	if got := snapshot(t, ctx, st.Store); got != mid {
		t.Fatalf("a repeated deletion changed rows:\n%s\nwant\n%s", got, mid)
	}
	wantNodeLoadExact(t, ctx, st.Store)
}

func TestTerminateEnvironmentFailedOrExpired(t *testing.T) {
	st, ctx, _ := owner(t)
	f := newTerminalFixture(t, ctx, st)

	_, err := st.TerminateEnvironment(ctx, f.b.Environment.ID, store.TerminalDeleted, "")
	wantClass(t, err, errdefs.ErrInvalid)
	_, err = st.TerminateEnvironment(ctx, f.b.Environment.ID, store.TerminalFailed, "")
	wantClass(t, err, errdefs.ErrInvalid)

	term, err := st.TerminateEnvironment(ctx, f.b.Environment.ID, store.TerminalFailed, "image_missing")
	must(t, err)
	if term.Cause != store.TerminalFailed || term.Cleanup.State != store.AllocationCleanupRequested {
		t.Fatalf("termination = %+v", term)
	}
	b, err := st.GetSession(ctx, f.b.Session.ID)
	must(t, err)
	if b.Session.State != store.SessionActive || b.Environment.State != store.EnvironmentFailed ||
		b.Environment.FailureCode != "image_missing" || b.Environment.TerminalCause != store.TerminalFailed {
		t.Fatalf("bundle = %+v", b)
	}
	wantTurn(t, ctx, st, f.queued, store.TurnFailed, store.TurnFailureEnvironmentFailed)
	wantTurn(t, ctx, st, f.overdue, store.TurnFailed, "runtime_not_ready")
	if r := wantTurn(t, ctx, st, f.running, store.TurnRunning, ""); r.CancelRequestedAt == nil {
		t.Fatal("running turn has no cancel request")
	}
	_, err = st.AcceptRuntime(ctx, f.acceptParams(t))
	wantClass(t, err, store.ErrRuntimeRevoked)
	_, _, err = st.SubmitTurn(ctx, turnParams(t, f.b.Session.ID, "late"))
	wantClass(t, err, store.ErrEnvironmentEnded)

	// The first cause stays: a later expiry or deletion keeps it.
	term, err = st.TerminateEnvironment(ctx, f.b.Environment.ID, store.TerminalExpired, "")
	must(t, err)
	if term.Cause != store.TerminalFailed {
		t.Fatalf("cause = %s", term.Cause)
	}
	b, err = st.RequestSessionDeletion(ctx, f.b.Session.ID)
	must(t, err)
	if b.Environment.TerminalCause != store.TerminalFailed || b.Environment.State != store.EnvironmentFailed {
		t.Fatalf("environment after deletion = %+v", b.Environment)
	}
}

func TestTerminateExpiredEnvironment(t *testing.T) {
	st, ctx, _ := owner(t)
	b, _ := storetest.RunningSession(t, st)
	term, err := st.TerminateEnvironment(ctx, b.Environment.ID, store.TerminalExpired, "")
	must(t, err)
	if term.Cause != store.TerminalExpired || term.Cleanup.State != store.AllocationCleanupRequested {
		t.Fatalf("termination = %+v", term)
	}
	got, err := st.GetSession(ctx, b.Session.ID)
	must(t, err)
	if got.Environment.State != store.EnvironmentExpired || got.Environment.FailureCode != "" {
		t.Fatalf("environment = %+v", got.Environment)
	}
}

// TestCancelDrainingHoldsTheKill: after terminal cleanup the allocation is
// draining while its running Turn's cancellation is unanswered, and stops
// draining once the Runtime reports the cancelled result, so the worker's
// Kill waits for that result (or store.CancelDrain) and not longer.
func TestCancelDrainingHoldsTheKill(t *testing.T) {
	st, ctx := ownedStore(t)
	f := newTerminalFixture(t, ctx, st)
	draining, err := st.CancelDraining(ctx, f.b.Allocation.ID)
	must(t, err)
	if draining {
		t.Fatal("draining before any cancellation was requested")
	}
	_, err = st.RequestSessionDeletion(ctx, f.b.Session.ID)
	must(t, err)
	if draining, err = st.CancelDraining(ctx, f.b.Allocation.ID); err != nil || !draining {
		t.Fatalf("after terminal cleanup with a running Turn: draining %v, %v; want true", draining, err)
	}
	_, err = st.FinishTurn(ctx, f.running, f.conn, store.TurnResult{State: store.TurnCancelled})
	must(t, err)
	if draining, err = st.CancelDraining(ctx, f.b.Allocation.ID); err != nil || draining {
		t.Fatalf("after the cancelled result: draining %v, %v; want false", draining, err)
	}
}

// TestCancelDrainingEnds: a Runtime that never answers the cancellation
// (its node gone, the Runtime stuck) holds the Kill only for CancelDrain
// by the database clock; after that the compute is killed all the same.
func TestCancelDrainingEnds(t *testing.T) {
	st, ctx := ownedStore(t)
	f := newTerminalFixture(t, ctx, st)
	_, err := st.RequestSessionDeletion(ctx, f.b.Session.ID)
	must(t, err)
	// The request as if made CancelDrain and a second ago.
	_, err = st.Pool().Exec(ctx, `UPDATE turns SET cancel_requested_at = now() - make_interval(secs => $2) WHERE id = $1`,
		f.running, store.CancelDrain.Seconds()+1)
	must(t, err)
	if draining, err := st.CancelDraining(ctx, f.b.Allocation.ID); err != nil || draining {
		t.Fatalf("a cancellation older than CancelDrain: draining %v, %v; want false", draining, err)
	}
	wantTurn(t, ctx, st, f.running, store.TurnRunning, "")
}
