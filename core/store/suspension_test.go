package store_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox"
)

// suspensionIdle is the test generations' idle time: short, so that the
// tests wait for it by the database clock.
const suspensionIdle = time.Second

// candidateIDs lists node's suspension candidates' allocation ids.
func candidateIDs(t *testing.T, st *storetest.Owned, node uuid.UUID) map[uuid.UUID]time.Time {
	t.Helper()
	got, err := st.ListSuspensionCandidatesForNode(t.Context(), store.SuspensionScan{NodeID: node, Limit: store.NodePageSize})
	must(t, err)
	out := map[uuid.UUID]time.Time{}
	for _, c := range got {
		out[c.ID] = c.IdleSince
	}
	return out
}

// TestSuspensionCandidatesOnTheDatabaseClock: a Session is a suspension
// candidate only after one of its Turns ended, with none queued or
// running, once its generation's idle time has passed by the database
// clock since its last Turn was submitted or ended; keepalives,
// observations and Runtime connections never reset it; a new Turn does;
// deletion ends candidacy.
func TestSuspensionCandidatesOnTheDatabaseClock(t *testing.T) {
	st, ctx, epoch := owner(t)
	gen := testGeneration("docker")
	gen.Specification.Suspension = sandbox.SuspensionPolicy{Idle: suspensionIdle, Retention: time.Hour}
	_, err := st.CommitGeneration(ctx, storetest.Seen(t, st), gen)
	must(t, err)
	b, cred := storetest.RunningSession(t, st)
	a, node := b.Allocation, b.Allocation.NodeID
	idleness := func() store.Idleness {
		i, err := st.SessionIdleSince(ctx, b.Session.ID)
		must(t, err)
		return i
	}
	wantCandidate := func(when string, want bool) time.Time {
		t.Helper()
		since, got := candidateIDs(t, st, node)[a.ID]
		if got != want {
			t.Fatalf("%s: candidate %v, want %v (idleness %+v)", when, got, want, idleness())
		}
		return since
	}
	// notYet: idle, but listed only if the policy's idle time has passed
	// by the database clock. The read after the scan bounds the scan's
	// time: if even it is short of the idle time, the scan must not have
	// listed it (on a slow machine the read may come too late to judge).
	notYet := func(when string) {
		t.Helper()
		_, got := candidateIDs(t, st, node)[a.ID]
		if i := idleness(); got && !i.IdleFor(suspensionIdle) {
			t.Fatalf("%s: listed before its idle time passed (%+v)", when, i)
		}
	}

	// Never a Turn: never a candidate, however long it waits.
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	wantCandidate("without a Turn", false)
	if idleness().Idle {
		t.Fatal("idle without a Turn")
	}

	// Queued, then running: not idle.
	first := turnParams(t, b.Session.ID, "true")
	_, _, err = st.SubmitTurn(ctx, first)
	must(t, err)
	if idleness().Idle {
		t.Fatal("idle with a queued Turn")
	}
	g := accept(t, ctx, st, b, cred, epoch)
	_, err = st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	if _, ok, err := st.ClaimNextTurn(ctx, g.Conn); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	wantCandidate("with a running Turn", false)

	// Ended: idle since it ended, a candidate once the idle time passed.
	code := int32(0)
	done, err := st.FinishTurn(ctx, first.ID, g.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code})
	must(t, err)
	i := idleness()
	if !i.Idle || done.EndedAt == nil || !i.Since.Equal(*done.EndedAt) {
		t.Fatalf("just after the end: %+v (ended %v)", i, done.EndedAt)
	}
	notYet("just after the end")
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	if since := wantCandidate("idle for the policy's time", true); !since.Equal(*done.EndedAt) {
		t.Fatalf("idle since %v, want the end %v", since, done.EndedAt)
	}
	if !idleness().IdleFor(suspensionIdle) {
		t.Fatal("the recheck disagrees with the scan")
	}

	// Keepalives, observations and the Runtime connection are no activity.
	must(t, st.TouchRuntimeConnection(ctx, g.Conn))
	_, err = st.RecordObservation(ctx, store.RecordObservationParams{
		ID: a.ID, Revision: a.Revision, Compute: store.ObservedRunning, Reason: "compute_running", Keepalive: true,
	})
	must(t, err)
	if since := wantCandidate("after a keepalive", true); !since.Equal(*done.EndedAt) {
		t.Fatalf("a keepalive moved the idle time to %v", since)
	}

	// A new Turn is activity: queued, not idle; cancelled, idle again from
	// the cancel, and a candidate only after the idle time again.
	second := turnParams(t, b.Session.ID, "true")
	_, _, err = st.SubmitTurn(ctx, second)
	must(t, err)
	wantCandidate("with a new queued Turn", false)
	cancelled, err := st.RequestTurnCancel(ctx, second.ID)
	must(t, err)
	if i := idleness(); !i.Idle || cancelled.EndedAt == nil || !i.Since.Equal(*cancelled.EndedAt) {
		t.Fatalf("after the cancel: %+v (ended %v)", i, cancelled.EndedAt)
	}
	notYet("just after the cancel")
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	wantCandidate("idle again", true)

	// Deletion ends candidacy.
	_, err = st.RequestSessionDeletion(ctx, b.Session.ID)
	must(t, err)
	wantCandidate("deletion requested", false)
}

// TestNoSuspensionWithoutAPolicy: under a generation without a suspension
// policy an idle Session is never a candidate.
func TestNoSuspensionWithoutAPolicy(t *testing.T) {
	st, ctx, epoch := owner(t)
	_, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker"))
	must(t, err)
	b, cred := storetest.RunningSession(t, st)
	turn := turnParams(t, b.Session.ID, "true")
	_, _, err = st.SubmitTurn(ctx, turn)
	must(t, err)
	g := accept(t, ctx, st, b, cred, epoch)
	_, err = st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	if _, ok, err := st.ClaimNextTurn(ctx, g.Conn); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	code := int32(0)
	_, err = st.FinishTurn(ctx, turn.ID, g.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code})
	must(t, err)
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	if i, err := st.SessionIdleSince(ctx, b.Session.ID); err != nil || !i.IdleFor(suspensionIdle) {
		t.Fatalf("idleness %+v, %v", i, err)
	}
	if got := candidateIDs(t, st, b.Allocation.NodeID); len(got) != 0 {
		t.Fatalf("candidates without a policy: %v", got)
	}
}
