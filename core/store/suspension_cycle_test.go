package store_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"
)

// suspendable is a running Session whose one Turn ended more than the
// idle time ago, with its Runtime's open connection.
type suspendable struct {
	b    store.SessionBundle
	cred []byte
	conn store.RuntimeGrant
}

// commitSuspensionGeneration commits generation 1 with a suspension
// policy (suspensionIdle, retention) and the given slots.
func commitSuspensionGeneration(t *testing.T, st *storetest.Owned, retention time.Duration, maxActive, maxRetained int) {
	t.Helper()
	gen := testGeneration("docker")
	gen.Specification.Suspension = sandbox.SuspensionPolicy{Idle: suspensionIdle, Retention: retention}
	gen.Specification.MaxActive, gen.Specification.MaxRetained = int32(maxActive), int32(maxRetained)
	_, err := st.CommitGeneration(context.Background(), storetest.Seen(t, st), gen)
	must(t, err)
}

// idleSession runs one Turn to its end on a new running Session and waits
// out the idle time.
func idleSession(t *testing.T, st *storetest.Owned, epoch uint64) suspendable {
	t.Helper()
	ctx := t.Context()
	b, cred := storetest.RunningSession(t, st)
	s := suspendable{b: b, cred: cred}
	s.finishTurn(t, st, epoch)
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	a, err := st.GetAllocation(ctx, b.Allocation.ID)
	must(t, err)
	s.b.Allocation = a
	return s
}

// finishTurn submits, claims and ends one Turn on a (new) connection.
func (s *suspendable) finishTurn(t *testing.T, st *storetest.Owned, epoch uint64) {
	t.Helper()
	ctx := t.Context()
	turn := turnParams(t, s.b.Session.ID, "true")
	_, _, err := st.SubmitTurn(ctx, turn)
	must(t, err)
	s.conn = accept(t, ctx, st, s.b, s.cred, epoch)
	_, err = st.MarkRuntimePrepared(ctx, s.conn.Conn)
	must(t, err)
	if _, ok, err := st.ClaimNextTurn(ctx, s.conn.Conn); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	code := int32(0)
	_, err = st.FinishTurn(ctx, turn.ID, s.conn.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code})
	must(t, err)
}

// wantPhase reads allocation id and checks its compute phase.
func wantPhase(t *testing.T, st *storetest.Owned, id uuid.UUID, want store.ComputePhase) store.Allocation {
	t.Helper()
	a, err := st.GetAllocation(t.Context(), id)
	must(t, err)
	if a.ComputePhase != want {
		t.Fatalf("phase %q, want %q", a.ComputePhase, want)
	}
	return a
}

// wantLoad checks node's active and retained counts, both as node_load
// keeps them and as counted from the rows.
func wantLoad(t *testing.T, st *storetest.Owned, node uuid.UUID, held, retained int64) {
	t.Helper()
	ctx := t.Context()
	var h, r int64
	must(t, st.Pool().QueryRow(ctx, `SELECT held, retained FROM node_load WHERE node_id = $1`, node).Scan(&h, &r))
	ch, err := st.NodeHeld(ctx, node)
	must(t, err)
	cr, err := st.NodeRetained(ctx, node)
	must(t, err)
	if h != held || r != retained || ch != held || cr != retained {
		t.Fatalf("node load held %d retained %d (counted %d, %d), want %d, %d", h, r, ch, cr, held, retained)
	}
}

// suspend drives s through a whole capture: arm, ack, claim, record.
func suspend(t *testing.T, st *storetest.Owned, s suspendable) (store.Allocation, uuid.UUID) {
	t.Helper()
	ctx := t.Context()
	op := uuid.New()
	a, err := st.ArmSuspension(ctx, s.b.Allocation.ID, s.b.Allocation.Revision, op)
	must(t, err)
	_, err = st.RecordQuiesceAck(ctx, a.ID, op)
	must(t, err)
	_, err = st.ClaimCapture(ctx, a.ID, op)
	must(t, err)
	a, err = st.RecordSuspended(ctx, a.ID, op, sandbox.SnapshotIdentity{ID: "snap-" + op.String(), Provenance: "test;digest=1"})
	must(t, err)
	return a, op
}

// TestSuspensionCycle: a whole cycle on the database: the quiesce intent
// before the capture, one capture per receipt, the node's active slot
// turned retained and back, the retention deadline anchored to the
// arming, one restore per receipt, and the consumed snapshot owed to
// cleanup until a confirmed Kill.
func TestSuspensionCycle(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	s := idleSession(t, st, epoch)
	id, node := s.b.Allocation.ID, s.b.Allocation.NodeID
	wantLoad(t, st, node, 1, 0)

	op := uuid.New()
	armed, err := st.ArmSuspension(ctx, id, s.b.Allocation.Revision, op)
	must(t, err)
	if armed.ComputePhase != store.PhaseQuiescing || armed.Suspension.Operation == nil || *armed.Suspension.Operation != op ||
		armed.Suspension.ArmedAt == nil {
		t.Fatalf("armed: %+v", armed)
	}
	// A second arming of the same revision is fenced.
	_, err = st.ArmSuspension(ctx, id, s.b.Allocation.Revision, uuid.New())
	wantClass(t, err, errdefs.ErrFenced)
	// No capture before the Runtime acknowledged, and none for another op.
	_, err = st.ClaimCapture(ctx, id, op)
	wantClass(t, err, errdefs.ErrFenced)
	_, err = st.RecordQuiesceAck(ctx, id, uuid.New())
	wantClass(t, err, errdefs.ErrFenced)
	_, err = st.RecordQuiesceAck(ctx, id, op)
	must(t, err)
	claimed, err := st.ClaimCapture(ctx, id, op)
	must(t, err)
	if claimed.ComputePhase != store.PhaseSuspending || claimed.Suspension.CaptureSentAt == nil {
		t.Fatalf("claimed: %+v", claimed)
	}
	// The receipt is spent.
	_, err = st.ClaimCapture(ctx, id, op)
	wantClass(t, err, errdefs.ErrFenced)
	wantLoad(t, st, node, 1, 0) // source teardown is not confirmed yet

	snap := sandbox.SnapshotIdentity{ID: "snap-1", Provenance: "docker-volumes;source-generation=1;digest=sha256:00"}
	suspended, err := st.RecordSuspended(ctx, id, op, snap)
	must(t, err)
	if suspended.ComputePhase != store.PhaseSuspended || suspended.Suspension.Snapshot != snap ||
		suspended.Suspension.RetentionUntil == nil || !suspended.Suspension.RetentionUntil.Equal(armed.Suspension.ArmedAt.Add(time.Hour)) {
		t.Fatalf("suspended: %+v (armed at %v)", suspended.Suspension, armed.Suspension.ArmedAt)
	}
	wantLoad(t, st, node, 0, 1)

	// A suspended Runtime is not admitted.
	_, err = st.AcceptRuntime(ctx, store.AcceptRuntimeParams{ConnectionID: uuid.New(), DeviceID: s.b.Allocation.DeviceID,
		Credential: runtimebootstrap.NewSecret(string(s.cred))})
	wantClass(t, err, store.ErrRuntimeNotAdmitted)

	// A queued Turn is work waiting.
	_, _, err = st.SubmitTurn(ctx, turnParams(t, s.b.Session.ID, "echo wake"))
	must(t, err)
	work := suspensionWork(t, st, node)[id]
	if !work.WorkWaiting || work.RetentionExpired {
		t.Fatalf("work %+v", work)
	}

	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "compute-g2"}
	rop := uuid.New()
	restoring, err := st.ArmRestore(ctx, id, suspended.Revision, rop, target)
	must(t, err)
	if restoring.ComputePhase != store.PhaseRestoring || restoring.ComputeGeneration != 2 || restoring.ComputeName != "compute-g2" {
		t.Fatalf("restoring: %+v", restoring)
	}
	wantLoad(t, st, node, 1, 0)
	_, err = st.ClaimRestore(ctx, id, rop)
	must(t, err)
	_, err = st.ClaimRestore(ctx, id, rop)
	wantClass(t, err, errdefs.ErrFenced)
	restored, err := st.RecordRestored(ctx, id, rop, "native-g2")
	must(t, err)
	got, err := restored.Compute(nil)
	must(t, err)
	if restored.ComputePhase != store.PhaseRunning || got != (sandbox.Compute{Reference: restored.Reference(), Generation: 2, Name: "compute-g2", ID: "native-g2"}) ||
		restored.Suspension.Snapshot != (sandbox.SnapshotIdentity{}) {
		t.Fatalf("restored: %+v", restored)
	}
	left, err := st.ListOwedLeftovers(ctx, restored)
	must(t, err)
	if len(left) != 1 || left[0].Snapshot == nil || *left[0].Snapshot != snap {
		t.Fatalf("leftovers %+v, want the consumed snapshot", left)
	}
	// The restored Runtime is admitted again.
	accept(t, ctx, st, s.b, s.cred, epoch)

	// Release waits for the leftover; a confirmed Kill covers it.
	_, err = st.RequestSessionDeletion(ctx, s.b.Session.ID)
	must(t, err)
	a, err := st.GetAllocation(ctx, id)
	must(t, err)
	_, err = st.RecordCleanup(ctx, id, a.Revision, true)
	must(t, err)
	if left, err = st.ListOwedLeftovers(ctx, a); err != nil || len(left) != 0 {
		t.Fatalf("leftovers after a confirmed kill: %+v %v", left, err)
	}
	_, err = st.Release(ctx, id)
	must(t, err)
	wantLoad(t, st, node, 0, 0)
}

// suspensionWork lists node's suspension work by allocation id.
func suspensionWork(t *testing.T, st *storetest.Owned, node uuid.UUID) map[uuid.UUID]store.SuspensionWork {
	t.Helper()
	got, err := st.ListSuspensionWorkForNode(t.Context(), store.SuspensionWorkScan{NodeID: node, Limit: store.NodePageSize,
		QuiesceTimeout: time.Minute, RestoreTimeout: time.Minute})
	must(t, err)
	out := map[uuid.UUID]store.SuspensionWork{}
	for _, w := range got {
		out[w.ID] = w
	}
	return out
}

// TestArmSuspensionRechecksUnderTheSessionLock: a Turn submitted after the
// candidate was listed keeps the Session running: the arming repeats the
// idle test and writes nothing.
func TestArmSuspensionRechecksUnderTheSessionLock(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	s := idleSession(t, st, epoch)
	if _, ok := candidateIDs(t, st, s.b.Allocation.NodeID)[s.b.Allocation.ID]; !ok {
		t.Fatal("not a candidate")
	}
	_, _, err := st.SubmitTurn(ctx, turnParams(t, s.b.Session.ID, "true"))
	must(t, err)
	_, err = st.ArmSuspension(ctx, s.b.Allocation.ID, s.b.Allocation.Revision, uuid.New())
	wantClass(t, err, errdefs.ErrFenced)
	wantPhase(t, st, s.b.Allocation.ID, store.PhaseRunning)
}

// TestWorkDuringQuiesceAbortsTheCapture: a Turn submitted while the
// Runtime quiesces is never claimed (one compute-phase check), and the
// capture claim aborts the suspension instead of consuming its receipt;
// the Turn is then claimed as usual.
func TestWorkDuringQuiesceAbortsTheCapture(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	s := idleSession(t, st, epoch)
	id := s.b.Allocation.ID
	op := uuid.New()
	_, err := st.ArmSuspension(ctx, id, s.b.Allocation.Revision, op)
	must(t, err)
	_, err = st.RecordQuiesceAck(ctx, id, op)
	must(t, err)
	turn := turnParams(t, s.b.Session.ID, "true")
	_, _, err = st.SubmitTurn(ctx, turn)
	must(t, err)
	if _, ok, err := st.ClaimNextTurn(ctx, s.conn.Conn); err != nil || ok {
		t.Fatalf("claimed while quiescing: %v %v", ok, err)
	}
	if !suspensionWork(t, st, s.b.Allocation.NodeID)[id].WorkWaiting {
		t.Fatal("work not waiting")
	}
	_, err = st.ClaimCapture(ctx, id, op)
	wantClass(t, err, errdefs.ErrFenced)
	wantPhase(t, st, id, store.PhaseRunning)
	if _, ok, err := st.ClaimNextTurn(ctx, s.conn.Conn); err != nil || !ok {
		t.Fatalf("claim after the abort: %v %v", ok, err)
	}
}

// TestQuiescingRuntimeIsAdmitted: a Runtime that reconnects while its
// suspension is armed is admitted (the gateway repeats the quiesce) until
// it acknowledged; AbortQuiesce returns the compute to running and admits
// it again.
func TestQuiescingRuntimeIsAdmitted(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	s := idleSession(t, st, epoch)
	op := uuid.New()
	_, err := st.ArmSuspension(ctx, s.b.Allocation.ID, s.b.Allocation.Revision, op)
	must(t, err)
	accept(t, ctx, st, s.b, s.cred, epoch)
	// Once acknowledged, a reconnection waits for the end of the
	// suspension (its welcome would remove the park marker).
	_, err = st.RecordQuiesceAck(ctx, s.b.Allocation.ID, op)
	must(t, err)
	_, err = st.AcceptRuntime(ctx, store.AcceptRuntimeParams{ConnectionID: uuid.New(), DeviceID: s.b.Allocation.DeviceID,
		Credential: runtimebootstrap.NewSecret(string(s.cred))})
	wantClass(t, err, store.ErrRuntimeNotAdmitted)
	_, err = st.AbortQuiesce(ctx, s.b.Allocation.ID, uuid.New())
	wantClass(t, err, errdefs.ErrFenced)
	_, err = st.AbortQuiesce(ctx, s.b.Allocation.ID, op)
	must(t, err)
	wantPhase(t, st, s.b.Allocation.ID, store.PhaseRunning)
	accept(t, ctx, st, s.b, s.cred, epoch)
}

// TestMaxRetainedBoundsSuspensions: a node holds at most max_retained
// snapshots, suspensions in flight included; a full node keeps its
// Sessions running.
func TestMaxRetainedBoundsSuspensions(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 1)
	first := idleSession(t, st, epoch)
	node := first.b.Allocation.NodeID
	second := sessionOnNode(t, st, epoch, node)
	op := uuid.New()
	_, err := st.ArmSuspension(ctx, first.b.Allocation.ID, first.b.Allocation.Revision, op)
	must(t, err)
	// In flight counts.
	_, err = st.ArmSuspension(ctx, second.b.Allocation.ID, second.b.Allocation.Revision, uuid.New())
	wantClass(t, err, store.ErrNoRoom)
	_, err = st.RecordQuiesceAck(ctx, first.b.Allocation.ID, op)
	must(t, err)
	_, err = st.ClaimCapture(ctx, first.b.Allocation.ID, op)
	must(t, err)
	_, err = st.RecordSuspended(ctx, first.b.Allocation.ID, op, sandbox.SnapshotIdentity{ID: "s1", Provenance: "p"})
	must(t, err)
	_, err = st.ArmSuspension(ctx, second.b.Allocation.ID, second.b.Allocation.Revision, uuid.New())
	wantClass(t, err, store.ErrNoRoom)
	wantPhase(t, st, second.b.Allocation.ID, store.PhaseRunning)
	wantLoad(t, st, node, 1, 1)
}

// sessionOnNode makes an idle running Session on node (the only present
// node of the test's database, so placement chooses it).
func sessionOnNode(t *testing.T, st *storetest.Owned, epoch uint64, node uuid.UUID) suspendable {
	t.Helper()
	ctx := t.Context()
	p := sessionParams(t, 8)
	cred := randomBytes(t, 32)
	p.CredentialDigest = hash(cred)
	b, err := st.CreateSession(ctx, p)
	must(t, err)
	if b.Placement.NodeID != node {
		t.Fatalf("placed on %s, want %s", b.Placement.NodeID, node)
	}
	a, err := st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-" + a.ID.String(), BootstrapComplete: true})
	must(t, err)
	b.Allocation = a
	s := suspendable{b: b, cred: cred}
	s.finishTurn(t, st, epoch)
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	s.b.Allocation, err = st.GetAllocation(ctx, a.ID)
	must(t, err)
	return s
}

// TestRestoreNeedsAnActiveSlot: the suspended-to-restoring transition
// takes an active slot under the placement lock; a node whose max_active
// slots a new Session took meanwhile keeps the snapshot suspended.
func TestRestoreNeedsAnActiveSlot(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 1, 4)
	s := idleSession(t, st, epoch)
	node := s.b.Allocation.NodeID
	suspended, _ := suspend(t, st, s)
	wantLoad(t, st, node, 0, 1)
	// The freed slot goes to a new Session (placement counts active only).
	p := sessionParams(t, 1)
	b, err := st.CreateSession(ctx, p)
	must(t, err)
	if b.Placement.NodeID != node {
		t.Fatalf("placed on %s", b.Placement.NodeID)
	}
	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"}
	_, err = st.ArmRestore(ctx, suspended.ID, suspended.Revision, uuid.New(), target)
	wantClass(t, err, store.ErrNoRoom)
	wantPhase(t, st, suspended.ID, store.PhaseSuspended)
	wantLoad(t, st, node, 1, 1)
}

// TestDeletionWinsOverWake: a Session deleted while suspended is never
// restored; its snapshot stays counted until cleanup releases it.
func TestDeletionWinsOverWake(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	suspended, _ := suspend(t, st, s)
	_, err := st.RequestSessionDeletion(ctx, s.b.Session.ID)
	must(t, err)
	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"}
	a, err := st.GetAllocation(ctx, suspended.ID)
	must(t, err)
	_, err = st.ArmRestore(ctx, a.ID, a.Revision, uuid.New(), target)
	wantClass(t, err, errdefs.ErrFenced)
	if a.State != store.AllocationCleanupRequested || a.ComputePhase != store.PhaseSuspended {
		t.Fatalf("after deletion: %s %s", a.State, a.ComputePhase)
	}
	wantLoad(t, st, a.NodeID, 0, 1)
	_, err = st.RecordCleanup(ctx, a.ID, a.Revision, true)
	must(t, err)
	_, err = st.Release(ctx, a.ID)
	must(t, err)
	wantLoad(t, st, a.NodeID, 0, 0)
}

// TestRetentionExpiryWinsOverWake: once the retention deadline passed by
// the database clock no restore is armed, and expiry ends the
// Environment (expired), its queued Turns, and requests its cleanup.
func TestRetentionExpiryWinsOverWake(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, 2*time.Second, 8, 4)
	s := idleSession(t, st, epoch)
	suspended, _ := suspend(t, st, s)
	// Not yet expired: expiry is fenced.
	_, err := st.ExpireRetention(ctx, suspended.ID)
	wantClass(t, err, errdefs.ErrFenced)
	queued := turnParams(t, s.b.Session.ID, "true")
	_, _, err = st.SubmitTurn(ctx, queued)
	must(t, err)
	time.Sleep(time.Until(*suspended.Suspension.RetentionUntil) + 200*time.Millisecond)
	if !suspensionWork(t, st, suspended.NodeID)[suspended.ID].RetentionExpired {
		t.Fatal("retention not reported expired")
	}
	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"}
	_, err = st.ArmRestore(ctx, suspended.ID, suspended.Revision, uuid.New(), target)
	wantClass(t, err, errdefs.ErrFenced)
	term, err := st.ExpireRetention(ctx, suspended.ID)
	must(t, err)
	if term.Cause != store.TerminalExpired || len(term.SettledTurns) != 1 || term.SettledTurns[0] != queued.ID {
		t.Fatalf("termination %+v", term)
	}
	got, err := st.GetSession(ctx, s.b.Session.ID)
	must(t, err)
	if got.Environment.State != store.EnvironmentExpired || got.Allocation.State != store.AllocationCleanupRequested {
		t.Fatalf("environment %s, allocation %s", got.Environment.State, got.Allocation.State)
	}
	turn, err := st.GetTurn(ctx, queued.ID)
	must(t, err)
	if turn.FailureCode != store.TurnFailureEnvironmentExpired {
		t.Fatalf("queued turn ended %q", turn.FailureCode)
	}
}

// TestAbandonedRestoreOwesItsTarget: a restore is given up only with the
// exact instance its attempt made (its native id, observed); that
// instance is owed to cleanup, the snapshot stays suspended, and the next
// restore, into a later incarnation, waits until the instance is
// confirmed absent.
func TestAbandonedRestoreOwesItsTarget(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	suspended, _ := suspend(t, st, s)
	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"}
	rop := uuid.New()
	a, err := st.ArmRestore(ctx, suspended.ID, suspended.Revision, rop, target)
	must(t, err)
	_, err = st.ClaimRestore(ctx, a.ID, rop)
	must(t, err)
	// Never observed: no abandonment.
	_, err = st.AbandonRestore(ctx, a.ID, rop, target)
	wantClass(t, err, errdefs.ErrInvalid)
	target.ID = "native-g2"
	a, err = st.AbandonRestore(ctx, a.ID, rop, target)
	must(t, err)
	if a.ComputePhase != store.PhaseSuspended || a.ComputeGeneration != 2 || a.Suspension.Snapshot != suspended.Suspension.Snapshot {
		t.Fatalf("abandoned: %+v", a)
	}
	left, err := st.ListOwedLeftovers(ctx, a)
	must(t, err)
	if len(left) != 1 || left[0].Compute == nil || *left[0].Compute != target {
		t.Fatalf("leftovers %+v, want %+v", left, target)
	}
	next := sandbox.Compute{Reference: a.Reference(), Generation: 3, Name: "g3"}
	_, err = st.ArmRestore(ctx, a.ID, a.Revision, uuid.New(), next)
	if !errors.Is(err, store.ErrTargetOwed) {
		t.Fatalf("a restore armed while the abandoned target is owed: %v", err)
	}
	must(t, st.MarkLeftoverDeleted(ctx, left[0].ID))
	if left, _ = st.ListOwedLeftovers(ctx, a); len(left) != 0 {
		t.Fatalf("leftover still owed: %+v", left)
	}
	if _, err := st.ArmRestore(ctx, a.ID, a.Revision, uuid.New(), next); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreWaitsWhileTheProviderIsDisabled: a restore is a bootstrap:
// while the provider is disabled neither its intent nor its receipt is
// taken (ErrProviderDisabled, nothing written), and both are once it is
// enabled again.
func TestRestoreWaitsWhileTheProviderIsDisabled(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	suspended, _ := suspend(t, st, s)
	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"}
	rop := uuid.New()
	_, err := st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	_, err = st.ArmRestore(ctx, suspended.ID, suspended.Revision, rop, target)
	if !errors.Is(err, store.ErrProviderDisabled) {
		t.Fatalf("arm restore while disabled: %v", err)
	}
	wantPhase(t, st, suspended.ID, store.PhaseSuspended)
	_, err = st.SetProviderDisabled(ctx, false, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	a, err := st.ArmRestore(ctx, suspended.ID, suspended.Revision, rop, target)
	must(t, err)
	_, err = st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	_, err = st.ClaimRestore(ctx, a.ID, rop)
	if !errors.Is(err, store.ErrProviderDisabled) {
		t.Fatalf("claim restore while disabled: %v", err)
	}
	if got := wantPhase(t, st, a.ID, store.PhaseRestoring); got.Suspension.RestoreSentAt != nil {
		t.Fatal("the receipt was spent while disabled")
	}
	_, err = st.SetProviderDisabled(ctx, false, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	_, err = st.ClaimRestore(ctx, a.ID, rop)
	must(t, err)
}

// TestTheRestoresFinalWriteLosesToTheSessionsEnd: deletion (which revokes
// the device) and retention expiry win over a restore up to its final
// compare-and-swap: a restore claimed before either is not recorded
// after it, and an expired one is ended by ExpireRetention.
func TestTheRestoresFinalWriteLosesToTheSessionsEnd(t *testing.T) {
	restoring := func(t *testing.T, retention time.Duration) (*storetest.Owned, context.Context, suspendable, store.Allocation, uuid.UUID) {
		st, ctx, epoch := owner(t)
		commitSuspensionGeneration(t, st, retention, 8, 4)
		s := idleSession(t, st, epoch)
		suspended, _ := suspend(t, st, s)
		rop := uuid.New()
		a, err := st.ArmRestore(ctx, suspended.ID, suspended.Revision, rop,
			sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"})
		must(t, err)
		a, err = st.ClaimRestore(ctx, a.ID, rop)
		must(t, err)
		return st, ctx, s, a, rop
	}
	t.Run("deletion", func(t *testing.T) {
		st, ctx, s, a, rop := restoring(t, time.Hour)
		_, err := st.RequestSessionDeletion(ctx, s.b.Session.ID)
		must(t, err)
		_, err = st.RecordRestored(ctx, a.ID, rop, "native-g2")
		wantClass(t, err, errdefs.ErrFenced)
		got := wantPhase(t, st, a.ID, store.PhaseRestoring)
		if got.State != store.AllocationCleanupRequested || got.DeviceRevokedAt == nil || got.Suspension.RestoredAt != nil {
			t.Fatalf("after deletion: %s revoked %v restored %v", got.State, got.DeviceRevokedAt, got.Suspension.RestoredAt)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		st, ctx, _, a, rop := restoring(t, 2*time.Second)
		time.Sleep(time.Until(*a.Suspension.RetentionUntil) + 200*time.Millisecond)
		_, err := st.RecordRestored(ctx, a.ID, rop, "native-g2")
		wantClass(t, err, errdefs.ErrFenced)
		wantPhase(t, st, a.ID, store.PhaseRestoring)
		term, err := st.ExpireRetention(ctx, a.ID)
		must(t, err)
		if term.Cause != store.TerminalExpired {
			t.Fatalf("termination %+v", term)
		}
	})
}

// TestRolledBackCaptureOwesItsSnapshot: a capture whose source runs again
// returns the compute to running and leaves the snapshot it made owed to
// cleanup; release is refused while a leftover is owed.
func TestRolledBackCaptureOwesItsSnapshot(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	id := s.b.Allocation.ID
	op := uuid.New()
	_, err := st.ArmSuspension(ctx, id, s.b.Allocation.Revision, op)
	must(t, err)
	_, err = st.RecordQuiesceAck(ctx, id, op)
	must(t, err)
	_, err = st.ClaimCapture(ctx, id, op)
	must(t, err)
	snap := sandbox.SnapshotIdentity{ID: "snap-rolled-back"}
	a, err := st.RollBackCapture(ctx, id, op, "", &snap)
	must(t, err)
	if a.ComputePhase != store.PhaseRunning || a.ProviderID != s.b.Allocation.ProviderID {
		t.Fatalf("rolled back: %+v", a)
	}
	left, err := st.ListOwedLeftovers(ctx, a)
	must(t, err)
	if len(left) != 1 || left[0].Snapshot == nil || left[0].Snapshot.ID != snap.ID {
		t.Fatalf("leftovers %+v", left)
	}
	ids, err := st.ListAllocationsOwingLeftovers(ctx, a.NodeID, uuid.Nil, store.NodePageSize)
	must(t, err)
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("owing %v", ids)
	}
	// The database refuses a release while the leftover is owed, whoever
	// writes it.
	_, err = st.Pool().Exec(ctx, `UPDATE allocations SET state = 'released', cleanup_requested_at = now(),
		cleanup_confirmed_at = now(), released_at = now() WHERE id = $1`, id)
	if err == nil {
		t.Fatal("released with a leftover owed")
	}
}

// TestAdminSuspendAndResume: SuspendSession arms without the idle wait
// (a Turn ended, nothing queued or running), ResumeSession is work waiting for a
// suspended Session, both are idempotent by request id, and a restored
// Session is no candidate until an idle time after its restore.
func TestAdminSuspendAndResume(t *testing.T) {
	st, ctx, _ := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	b, _ := storetest.RunningSession(t, st)
	id, node := b.Allocation.ID, b.Allocation.NodeID

	// A Turn queued before any ended: refused, nothing recorded.
	turn := turnParams(t, b.Session.ID, "true")
	_, _, err := st.SubmitTurn(ctx, turn)
	must(t, err)
	req := uuid.New()
	_, err = st.RequestSuspend(ctx, b.Session.ID, req)
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "no_turn_ended")
	_, err = st.RequestTurnCancel(ctx, turn.ID)
	must(t, err)

	// The cancelled Turn ended, less than the idle time ago: a candidate
	// at once on request.
	if _, ok := candidateIDs(t, st, node)[id]; ok {
		t.Fatal("a candidate before the request")
	}
	_, err = st.RequestSuspend(ctx, b.Session.ID, req)
	must(t, err)
	if _, ok := candidateIDs(t, st, node)[id]; !ok {
		t.Fatal("not a candidate after the request")
	}
	// The same request again changes nothing; its id for a resume is taken.
	_, err = st.RequestSuspend(ctx, b.Session.ID, req)
	must(t, err)
	_, err = st.RequestResume(ctx, b.Session.ID, req)
	wantClass(t, err, errdefs.ErrExists)

	a, err := st.GetAllocation(ctx, id)
	must(t, err)
	op := uuid.New()
	a, err = st.ArmSuspension(ctx, id, a.Revision, op)
	must(t, err)
	if a.Suspension.RequestedAt != nil {
		t.Fatal("arming did not consume the request")
	}
	_, err = st.RecordQuiesceAck(ctx, id, op)
	must(t, err)
	_, err = st.ClaimCapture(ctx, id, op)
	must(t, err)
	suspended, err := st.RecordSuspended(ctx, id, op, sandbox.SnapshotIdentity{ID: "s", Provenance: "p"})
	must(t, err)
	if suspensionWork(t, st, node)[id].WorkWaiting {
		t.Fatal("work waiting before the resume")
	}
	// The cancelled Turn's end is older than the idle time from here on.
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	resume := uuid.New()
	_, err = st.RequestResume(ctx, b.Session.ID, resume)
	must(t, err)
	if !suspensionWork(t, st, node)[id].WorkWaiting {
		t.Fatal("no work waiting after the resume")
	}
	rop := uuid.New()
	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"}
	_, err = st.ArmRestore(ctx, id, suspended.Revision, rop, target)
	must(t, err)
	_, err = st.ClaimRestore(ctx, id, rop)
	must(t, err)
	restored, err := st.RecordRestored(ctx, id, rop, "n2")
	must(t, err)
	if restored.Suspension.WakeRequestedAt != nil || restored.Suspension.RestoredAt == nil {
		t.Fatalf("restored %+v", restored.Suspension)
	}
	// The Turn ended more than an idle time ago, but the restore is
	// activity: no suspension until an idle time after it.
	_, err = st.ArmSuspension(ctx, id, restored.Revision, uuid.New())
	wantClass(t, err, errdefs.ErrFenced)
	if _, ok := candidateIDs(t, st, node)[id]; ok {
		t.Fatal("a candidate just after its restore")
	}
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	if _, ok := candidateIDs(t, st, node)[id]; !ok {
		t.Fatal("not a candidate an idle time after its restore")
	}
	// Resuming running compute changes nothing.
	_, err = st.RequestResume(ctx, b.Session.ID, uuid.New())
	must(t, err)
	wantPhase(t, st, id, store.PhaseRunning)
	if _, err := st.ArmSuspension(ctx, id, restored.Revision, uuid.New()); err != nil {
		t.Fatalf("arming an idle time after the restore: %v", err)
	}
}

// TestAdminSuspendObeysTheIdlePredicate: SuspendSession applies the idle
// suspension's predicate (session_idle_since) except the idle time: a
// Session that never ended a Turn is refused (no_turn_ended) and one with
// a Turn queued or running too (session_busy); neither records a request,
// so neither becomes a candidate. Once a Turn ended and nothing is queued
// or running, the request is accepted and the suspension armed at once.
func TestAdminSuspendObeysTheIdlePredicate(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	b, cred := storetest.RunningSession(t, st)
	s := suspendable{b: b, cred: cred}
	id, node := b.Allocation.ID, b.Allocation.NodeID
	wantNoRequest := func(when string) {
		t.Helper()
		a := wantPhase(t, st, id, store.PhaseRunning)
		if a.Suspension.RequestedAt != nil {
			t.Fatalf("%s: a suspension request was recorded", when)
		}
		if _, ok := candidateIDs(t, st, node)[id]; ok {
			t.Fatalf("%s: a suspension candidate", when)
		}
	}

	// Never ran a Turn: refused with what to wait for.
	_, err := st.RequestSuspend(ctx, b.Session.ID, uuid.New())
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "no_turn_ended")
	wantNoRequest("no turn ended")

	// The first Turn queued, then running: still refused.
	turn := turnParams(t, b.Session.ID, "true")
	_, _, err = st.SubmitTurn(ctx, turn)
	must(t, err)
	_, err = st.RequestSuspend(ctx, b.Session.ID, uuid.New())
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "no_turn_ended")
	s.conn = accept(t, ctx, st, b, cred, epoch)
	_, err = st.MarkRuntimePrepared(ctx, s.conn.Conn)
	must(t, err)
	if _, ok, err := st.ClaimNextTurn(ctx, s.conn.Conn); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	_, err = st.RequestSuspend(ctx, b.Session.ID, uuid.New())
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "no_turn_ended")
	wantNoRequest("the first turn running")
	code := int32(0)
	_, err = st.FinishTurn(ctx, turn.ID, s.conn.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code})
	must(t, err)

	// A Turn ended and another is queued: busy.
	_, _, err = st.SubmitTurn(ctx, turnParams(t, b.Session.ID, "true"))
	must(t, err)
	_, err = st.RequestSuspend(ctx, b.Session.ID, uuid.New())
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "session_busy")
	wantNoRequest("a turn queued after one ended")
}

// TestAdminSuspendIsArmedOnlyUnderThePredicate: a suspend-now request is
// armed only while the Session satisfies the idle predicate, also for a
// request recorded before this rule (a Session that never ended a Turn):
// it is no candidate, and its arming is fenced and arms nothing.
func TestAdminSuspendIsArmedOnlyUnderThePredicate(t *testing.T) {
	st, ctx, _ := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	b, _ := storetest.RunningSession(t, st)
	id := b.Allocation.ID
	// A request recorded by an earlier Core, which checked only that
	// nothing was queued or running.
	_, err := st.Pool().Exec(ctx, `UPDATE allocations SET suspend_requested_at = now() WHERE id = $1`, id)
	must(t, err)
	a, err := st.GetAllocation(ctx, id)
	must(t, err)
	if _, ok := candidateIDs(t, st, b.Allocation.NodeID)[id]; ok {
		t.Fatal("a Session that never ended a Turn is a candidate")
	}
	_, err = st.ArmSuspension(ctx, id, a.Revision, uuid.New())
	wantClass(t, err, errdefs.ErrFenced)
	wantPhase(t, st, id, store.PhaseRunning)
}

// TestNodeWithOnlySnapshotsStillHolds: a node whose only Environment is
// suspended holds nothing actively but still holds it (its snapshot), so
// node removal stays refused until the Session is deleted and released.
func TestNodeWithOnlySnapshotsStillHolds(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	node := s.b.Allocation.NodeID
	suspended, _ := suspend(t, st, s)
	wantLoad(t, st, node, 0, 1)
	if holds, err := st.NodeHolds(ctx, node); err != nil || !holds {
		t.Fatalf("node holds %v (%v) with a snapshot on it", holds, err)
	}
	_, err := st.RequestSessionDeletion(ctx, s.b.Session.ID)
	must(t, err)
	a, err := st.GetAllocation(ctx, suspended.ID)
	must(t, err)
	_, err = st.RecordCleanup(ctx, a.ID, a.Revision, true)
	must(t, err)
	_, err = st.Release(ctx, a.ID)
	must(t, err)
	if holds, err := st.NodeHolds(ctx, node); err != nil || holds {
		t.Fatalf("node holds %v (%v) after the release", holds, err)
	}
}

// wantNodeWork checks node's work probe against the first page of each
// scan it stands for (the reference) and against want (what the test's
// state should be).
func wantNodeWork(t *testing.T, st *storetest.Owned, node uuid.UUID, want store.NodeWork, when string) {
	t.Helper()
	ctx := t.Context()
	got, err := st.ProbeNodeWork(ctx, node)
	must(t, err)
	pending, err := st.ListPendingForNode(ctx, node, uuid.Nil, store.NodePageSize)
	must(t, err)
	work, err := st.ListAllocationWorkForNode(ctx, node, uuid.Nil, store.NodePageSize)
	must(t, err)
	candidates, err := st.ListSuspensionCandidatesForNode(ctx, store.SuspensionScan{NodeID: node, Limit: store.NodePageSize})
	must(t, err)
	owing, err := st.ListAllocationsOwingLeftovers(ctx, node, uuid.Nil, store.NodePageSize)
	must(t, err)
	forks, err := st.ListForkWorkForNode(ctx, node, uuid.Nil, store.NodePageSize)
	must(t, err)
	seeds, err := st.ListSeedWorkForNode(ctx, node, uuid.Nil, store.NodePageSize)
	must(t, err)
	pages := store.NodeWork{
		Pending: len(pending) > 0, AllocationWork: len(work) > 0, SuspensionWork: len(suspensionWork(t, st, node)) > 0,
		SuspensionCandidates: len(candidates) > 0, Leftovers: len(owing) > 0, Forks: len(forks) > 0, Seeds: len(seeds) > 0,
	}
	if got != pages || got != want {
		t.Fatalf("%s: probe %+v, first pages %+v, want %+v", when, got, pages, want)
	}
}

// TestProbeNodeWorkFlagsMatchFirstPages walks one Session through every
// scan's states (pending, claimed, running, an idle candidate, armed, a
// rolled-back capture owing its snapshot, deletion, release): at each the
// work probe's flags equal "that scan's first page is not empty", and
// another node's probe stays empty. The direct lane is never probed.
func TestProbeNodeWorkFlagsMatchFirstPages(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	other := storetest.EnabledNode(t, st)
	node := presentNode(t, ctx, st)
	check := func(want store.NodeWork, when string) {
		t.Helper()
		wantNodeWork(t, st, node, want, when)
		wantNodeWork(t, st, other, store.NodeWork{}, when+" (another node)")
	}
	check(store.NodeWork{}, "no Session")

	p := sessionParams(t, 5)
	cred := []byte(base64.RawURLEncoding.EncodeToString(randomBytes(t, 32)))
	p.CredentialDigest = hash(cred)
	b, err := st.CreateSession(ctx, p)
	must(t, err)
	if b.Placement.NodeID != node {
		t.Fatalf("placed on %s, want %s", b.Placement.NodeID, node)
	}
	check(store.NodeWork{Pending: true}, "allocated")

	a, err := st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	check(store.NodeWork{AllocationWork: true}, "create dispatched")
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-1", BootstrapComplete: true})
	must(t, err)
	check(store.NodeWork{}, "running")

	b.Allocation = a
	s := suspendable{b: b, cred: cred}
	s.finishTurn(t, st, epoch)
	check(store.NodeWork{}, "a Turn just ended")
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	check(store.NodeWork{SuspensionCandidates: true}, "idle for the policy's time")

	op := uuid.New()
	a, err = st.GetAllocation(ctx, a.ID)
	must(t, err)
	_, err = st.ArmSuspension(ctx, a.ID, a.Revision, op)
	must(t, err)
	check(store.NodeWork{SuspensionWork: true}, "armed")
	_, err = st.RecordQuiesceAck(ctx, a.ID, op)
	must(t, err)
	_, err = st.ClaimCapture(ctx, a.ID, op)
	must(t, err)
	snap := sandbox.SnapshotIdentity{ID: "snap-probe"}
	_, err = st.RollBackCapture(ctx, a.ID, op, "", &snap)
	must(t, err)
	check(store.NodeWork{Leftovers: true}, "rolled back owing its snapshot")

	_, err = st.RequestSessionDeletion(ctx, b.Session.ID)
	must(t, err)
	check(store.NodeWork{AllocationWork: true}, "deletion requested")
	a, err = st.GetAllocation(ctx, a.ID)
	must(t, err)
	_, err = st.RecordCleanup(ctx, a.ID, a.Revision, true)
	must(t, err)
	check(store.NodeWork{AllocationWork: true}, "cleanup confirmed")
	_, err = st.Release(ctx, a.ID)
	must(t, err)
	check(store.NodeWork{}, "released")

	if got, err := st.ProbeNodeWork(ctx, store.DirectLane); err != nil || got != store.AllNodeWork {
		t.Fatalf("direct lane: %+v %v, want every flag", got, err)
	}
}
