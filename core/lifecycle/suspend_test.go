package lifecycle_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/lifecycle"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker/dockertest"
)

// suspendIdle is the test deployments' idle time.
const suspendIdle = time.Second

// suspending is a one-node environment whose deployment suspends after
// suspendIdle and keeps snapshots for retention.
func suspending(t *testing.T, retention time.Duration, maxActive, maxRetained int32) (*env, *node, *lifecycle.Worker) {
	t.Helper()
	e := newEnvSpec(t, 1, sandbox.Specification{Resources: resources, MaxActive: maxActive, MaxRetained: maxRetained,
		Suspension: sandbox.SuspensionPolicy{Idle: suspendIdle, Retention: retention}})
	e.cfg.QuiesceTimeout = 2 * time.Second
	n := e.only(t)
	return e, n, lifecycle.NewWorker(e.cfg, n.id)
}

// idle runs one Turn to its end on b's connected Runtime and waits out
// the idle time: b becomes a suspension candidate.
func (e *env) idle(t *testing.T, n *node, b store.SessionBundle) store.RuntimeGrant {
	t.Helper()
	ctx := context.Background()
	g := e.connect(t, n, b)
	_, err := e.st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	turn := e.submit(t, b)
	if _, ok, err := e.st.ClaimNextTurn(ctx, g.Conn); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	code := int32(0)
	_, err = e.st.FinishTurn(ctx, turn, g.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code})
	must(t, err)
	time.Sleep(suspendIdle + 100*time.Millisecond)
	return g
}

// submit queues a Turn on b's Session.
func (e *env) submit(t *testing.T, b store.SessionBundle) uuid.UUID {
	t.Helper()
	script := "true"
	id := uuid.New()
	_, _, err := e.st.SubmitTurn(context.Background(), store.SubmitTurnParams{
		ID: id, SessionID: b.Session.ID, RequestID: uuid.New(), RequestDigest: make([]byte, 32),
		ShellScript: &script, WorkingDirectory: "/workspace",
		Input:   store.SealedCredential{Ciphertext: make([]byte, 20), Nonce: make([]byte, 12)},
		Timeout: time.Minute, QueueTimeout: time.Minute, MaxOutputBytes: 10,
	})
	must(t, err)
	return id
}

// wantPhase checks a's compute phase.
func (e *env) wantPhase(t *testing.T, id uuid.UUID, want store.ComputePhase) store.Allocation {
	t.Helper()
	a := e.alloc(t, id)
	if a.ComputePhase != want {
		t.Fatalf("phase %s, want %s (state %s)", a.ComputePhase, want, a.State)
	}
	return a
}

// ack records the Runtime's acknowledgement of a's armed suspension, as
// the gateway does when the Runtime answers.
func (e *env) ack(t *testing.T, a store.Allocation) {
	t.Helper()
	_, err := e.st.RecordQuiesceAck(context.Background(), a.ID, *a.Suspension.Operation)
	must(t, err)
}

// containersOf lists the fixture's containers whose name starts with
// prefix.
func containersOf(n *node, prefix string) []string {
	var out []string
	for _, c := range n.srv.Containers() {
		if strings.HasPrefix(c.Name, prefix) {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestWorkerSuspendsAnIdleSessionAndAQueuedTurnWakesIt: the whole cycle
// through the real Docker adapter: no capture before the Runtime's
// acknowledgement; the capture removes the source and keeps a snapshot,
// and frees the active slot; a queued Turn restores into the next
// incarnation with the same workspace, wakes its Runtime, and the
// consumed snapshot is deleted.
func TestWorkerSuspendsAnIdleSessionAndAQueuedTurnWakesIt(t *testing.T) {
	e, n, w := suspending(t, time.Hour, 4, 4)
	b := e.running(t, w, n)
	name := n.p.Name(b.Allocation.Reference())
	e.idle(t, n, b)

	pass(t, w)
	armed := e.wantPhase(t, b.Allocation.ID, store.PhaseQuiescing)
	for range 2 {
		pass(t, w)
	}
	if c := count(n.srv, dockertest.CallContainerPause); c != 0 {
		t.Fatalf("paused %d times before the acknowledgement", c)
	}
	e.ack(t, armed)
	pass(t, w)
	suspended := e.wantPhase(t, b.Allocation.ID, store.PhaseSuspended)
	if _, ok := n.srv.Container(name); ok {
		t.Fatal("the source container is still there")
	}
	if got := containersOf(n, name+"-s"); len(got) != 1 || got[0] != suspended.Suspension.Snapshot.ID {
		t.Fatalf("snapshot containers %v, want %s", got, suspended.Suspension.Snapshot.ID)
	}
	e.wantHeld(t, n.id, 0, "suspended")
	if r, err := e.st.NodeRetained(context.Background(), n.id); err != nil || r != 1 {
		t.Fatalf("retained %d %v", r, err)
	}
	// Nothing to do while nothing waits.
	pass(t, w)
	e.wantPhase(t, b.Allocation.ID, store.PhaseSuspended)

	e.submit(t, b)
	pass(t, w)
	restored := e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
	if restored.ComputeGeneration != 2 || restored.ComputeName != name+"-g2" || restored.ComputeID == "" {
		t.Fatalf("restored %+v", restored)
	}
	ct, ok := n.srv.Container(name + "-g2")
	if !ok || ct.ID != restored.ComputeID || ct.State != dockertest.StateRunning {
		t.Fatalf("incarnation 2: %+v %v", ct, ok)
	}
	woke := false
	for _, x := range n.srv.Execs() {
		if x.ContainerID == ct.ID && slices.Equal(x.Cmd, runtimebootstrap.WakeCommand()) {
			woke = true
		}
	}
	if !woke {
		t.Fatal("no wake command ran in the restored incarnation")
	}
	e.wantHeld(t, n.id, 1, "restored")
	// The consumed snapshot is deleted by a later pass.
	pass(t, w)
	if got := containersOf(n, name+"-s"); len(got) != 0 {
		t.Fatalf("snapshot containers left: %v", got)
	}
	if left, err := e.st.ListOwedLeftovers(context.Background(), restored); err != nil || len(left) != 0 {
		t.Fatalf("leftovers %+v %v", left, err)
	}
	// The restored incarnation is observed exactly.
	_, err := e.st.Pool().Exec(context.Background(), `UPDATE allocations SET observed_at = NULL, observed_compute = NULL, observed_reason = NULL WHERE id = $1`, b.Allocation.ID)
	must(t, err)
	pass(t, w)
	e.wantObserved(t, b, store.ObservedRunning, lifecycle.ReasonRunning)

	// Deletion then removes every incarnation and snapshot.
	_, err = e.svc.Delete(context.Background(), projects.All(), b.Session.ID)
	must(t, err)
	for range 4 {
		pass(t, w)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationReleased {
		t.Fatalf("after deletion: %s", a.State)
	}
	if got := containersOf(n, name); len(got) != 0 {
		t.Fatalf("containers left: %v", got)
	}
}

// TestWorkerNeverCapturesWithoutAcknowledgement: a Runtime that does not
// acknowledge within the quiesce timeout keeps its compute: the
// suspension is aborted and nothing was paused or copied.
func TestWorkerNeverCapturesWithoutAcknowledgement(t *testing.T) {
	e, n, w := suspending(t, time.Hour, 4, 4)
	b := e.running(t, w, n)
	e.idle(t, n, b)
	pass(t, w)
	e.wantPhase(t, b.Allocation.ID, store.PhaseQuiescing)
	time.Sleep(e.cfg.QuiesceTimeout + 200*time.Millisecond)
	pass(t, w)
	e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
	for _, c := range []string{dockertest.CallContainerPause, dockertest.CallArchiveRead} {
		if k := count(n.srv, c); k != 0 {
			t.Fatalf("%s called %d times", c, k)
		}
	}
}

// TestWorkArrivingBeforeTheCaptureKeepsTheSessionRunning: a Turn queued
// after the acknowledgement aborts the suspension instead of a capture.
func TestWorkArrivingBeforeTheCaptureKeepsTheSessionRunning(t *testing.T) {
	e, n, w := suspending(t, time.Hour, 4, 4)
	b := e.running(t, w, n)
	e.idle(t, n, b)
	pass(t, w)
	e.ack(t, e.wantPhase(t, b.Allocation.ID, store.PhaseQuiescing))
	e.submit(t, b)
	pass(t, w)
	e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
	if k := count(n.srv, dockertest.CallContainerPause); k != 0 {
		t.Fatalf("paused %d times", k)
	}
}

// TestAnUnknownCaptureIsObservedNeverRepeated: a capture whose answer is
// lost is observed with ObserveOnly on the next pass; it is never sent
// again: an incomplete one thaws the source. What the incomplete capture
// left is the allocation's, and its deletion removes it.
func TestAnUnknownCaptureIsObservedNeverRepeated(t *testing.T) {
	e, n, w := suspending(t, time.Hour, 4, 4)
	b := e.running(t, w, n)
	name := n.p.Name(b.Allocation.Reference())
	e.idle(t, n, b)
	pass(t, w)
	e.ack(t, e.wantPhase(t, b.Allocation.ID, store.PhaseQuiescing))
	// The copy out of the source breaks mid-capture.
	n.srv.Arm(dockertest.CallArchiveRead, dockertest.FaultDrop, nil)
	pass(t, w)
	e.wantPhase(t, b.Allocation.ID, store.PhaseSuspending)
	if ct, _ := n.srv.Container(name); ct.State != dockertest.StatePaused {
		t.Fatalf("source %s, want paused", ct.State)
	}
	captures := count(n.srv, dockertest.CallContainerCreate)
	pass(t, w)
	a := e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
	if ct, _ := n.srv.Container(name); ct.State != dockertest.StateRunning || ct.ID != a.ProviderID {
		t.Fatalf("source %+v, want running", ct)
	}
	if k := count(n.srv, dockertest.CallContainerCreate); k != captures {
		t.Fatalf("containers created after the unknown capture: %d", k-captures)
	}
	// Not suspended again at once: the next attempt waits an idle time.
	pass(t, w)
	e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
	if k := count(n.srv, dockertest.CallContainerPause); k != 1 {
		t.Fatalf("paused %d times", k)
	}
	_, err := e.svc.Delete(context.Background(), projects.All(), b.Session.ID)
	must(t, err)
	for range 4 {
		pass(t, w)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationReleased {
		t.Fatalf("after deletion: %s", a.State)
	}
	if got := containersOf(n, name); len(got) != 0 {
		t.Fatalf("containers left: %v", got)
	}
	for _, v := range n.srv.Volumes() {
		if strings.HasPrefix(v.Name, name) {
			t.Fatalf("volume left: %s", v.Name)
		}
	}
}

// TestRetentionExpiryLeavesNothing: a snapshot kept past its retention
// expires the Environment, ends its queued Turn, and cleanup removes the
// snapshot and releases the allocation; no restore happens.
func TestRetentionExpiryLeavesNothing(t *testing.T) {
	e, n, w := suspending(t, 2*time.Second, 4, 4)
	b := e.running(t, w, n)
	name := n.p.Name(b.Allocation.Reference())
	e.idle(t, n, b)
	pass(t, w)
	e.ack(t, e.wantPhase(t, b.Allocation.ID, store.PhaseQuiescing))
	pass(t, w)
	s := e.wantPhase(t, b.Allocation.ID, store.PhaseSuspended)
	time.Sleep(time.Until(*s.Suspension.RetentionUntil) + 200*time.Millisecond)
	turn := e.submit(t, b)
	for range 4 {
		pass(t, w)
	}
	got := e.bundle(t, b)
	if got.Environment.State != store.EnvironmentExpired || got.Allocation.ID != uuid.Nil && got.Allocation.State != store.AllocationReleased {
		t.Fatalf("environment %s, allocation %s", got.Environment.State, got.Allocation.State)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationReleased {
		t.Fatalf("allocation %s", a.State)
	}
	tr, err := e.st.GetTurn(context.Background(), turn)
	must(t, err)
	if tr.FailureCode != store.TurnFailureEnvironmentExpired {
		t.Fatalf("queued turn %s %q", tr.State, tr.FailureCode)
	}
	if got := containersOf(n, name); len(got) != 0 {
		t.Fatalf("containers left: %v", got)
	}
	for _, v := range n.srv.Volumes() {
		if strings.HasPrefix(v.Name, name) {
			t.Fatalf("volume left: %s", v.Name)
		}
	}
}
