package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

func fileOp(t *testing.T, st *storetest.Owned, session uuid.UUID, perSession int) (store.FileOperation, error) {
	t.Helper()
	return st.SubmitFileOperation(t.Context(), store.SubmitFileOperationParams{
		ID: newUUID(t), SessionID: session, RequestID: newUUID(t), Direction: store.FileUpload, PerSession: perSession,
	})
}

// TestFileOperationIsActivityAndBlocksSuspension: a pending or running
// file operation makes the Session not idle (session_idle_since), so the
// arming and the capture claim refuse; its end is activity; the claim
// needs a prepared connection with running compute and never claims twice.
func TestFileOperationIsActivityAndBlocksSuspension(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	s := idleSession(t, st, epoch)
	id := s.b.Allocation.ID
	if _, ok := candidateIDs(t, st, s.b.Allocation.NodeID)[id]; !ok {
		t.Fatal("not a candidate before the file operation")
	}

	op, err := fileOp(t, st, s.b.Session.ID, 4)
	must(t, err)
	if op.State != store.FilePending {
		t.Fatalf("state %q", op.State)
	}
	if i, err := st.SessionIdleSince(ctx, s.b.Session.ID); err != nil || i.Idle {
		t.Fatalf("idle with a pending file operation: %+v %v", i, err)
	}
	if _, ok := candidateIDs(t, st, s.b.Allocation.NodeID)[id]; ok {
		t.Fatal("a candidate with a pending file operation")
	}
	_, err = st.ArmSuspension(ctx, id, s.b.Allocation.Revision, uuid.New())
	wantClass(t, err, errdefs.ErrFenced)

	// Claimed once, by the prepared connection; a second claim finds none.
	got, ok, err := st.ClaimFileOperation(ctx, s.conn.Conn)
	if err != nil || !ok || got.ID != op.ID || got.State != store.FileRunning || got.ConnectionID == nil {
		t.Fatalf("claim: %+v %v %v", got, ok, err)
	}
	if _, ok, err := st.ClaimFileOperation(ctx, s.conn.Conn); err != nil || ok {
		t.Fatalf("second claim: %v %v", ok, err)
	}
	if i, _ := st.SessionIdleSince(ctx, s.b.Session.ID); i.Idle {
		t.Fatal("idle with a running file operation")
	}

	// The Transfer stream's check: the device's credential and its open
	// connection; another device or credential is refused.
	if _, err := st.TransferOperation(ctx, op.ID, s.b.Allocation.DeviceID, runtimebootstrap.NewSecret(string(s.cred))); err != nil {
		t.Fatalf("transfer operation: %v", err)
	}
	_, err = st.TransferOperation(ctx, op.ID, s.b.Allocation.DeviceID, runtimebootstrap.NewSecret("wrong"))
	wantClass(t, err, store.ErrRuntimeCredential)
	_, err = st.TransferOperation(ctx, op.ID, newUUID(t), runtimebootstrap.NewSecret(string(s.cred)))
	wantClass(t, err, errdefs.ErrNotFound)

	done, err := st.FinishFileOperation(ctx, op.ID, store.FileResult{Counts: store.FileCounts{Files: 2, Bytes: 10}})
	must(t, err)
	if done.State != store.FileDone || done.EndedAt == nil || done.Counts.Files != 2 {
		t.Fatalf("finished: %+v", done)
	}
	// The first end stays.
	_, err = st.FinishFileOperation(ctx, op.ID, store.FileResult{FailureCode: "runtime_disconnected"})
	wantClass(t, err, errdefs.ErrNotFound)
	i, err := st.SessionIdleSince(ctx, s.b.Session.ID)
	must(t, err)
	if !i.Idle || !i.Since.Equal(*done.EndedAt) {
		t.Fatalf("after the end: %+v, want idle since %v", i, done.EndedAt)
	}
	_, err = st.TransferOperation(ctx, op.ID, s.b.Allocation.DeviceID, runtimebootstrap.NewSecret(string(s.cred)))
	wantClass(t, err, errdefs.ErrNotFound)
}

// TestFileOperationNeedsRunningComputeAndWakes: an operation for a
// suspended Session is work waiting (the wake), is never claimed while the
// compute is not running, and a Session without an ended Turn stays
// without one (a file operation is not a Turn).
func TestFileOperationNeedsRunningComputeAndWakes(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	s := idleSession(t, st, epoch)
	a, _ := suspend(t, st, s)
	if suspensionWork(t, st, a.NodeID)[a.ID].WorkWaiting {
		t.Fatal("work waiting before the file operation")
	}
	_, err := fileOp(t, st, s.b.Session.ID, 4)
	must(t, err)
	if !suspensionWork(t, st, a.NodeID)[a.ID].WorkWaiting {
		t.Fatal("a pending file operation is not work waiting")
	}
	if _, ok, err := st.ClaimFileOperation(ctx, s.conn.Conn); err != nil || ok {
		t.Fatalf("claimed while suspended: %v %v", ok, err)
	}

	// Without an ended Turn the Session stays not idle after the file
	// operation ends: the first-Turn rule of the guide.
	fresh, cred := storetest.RunningSession(t, st)
	op, err := fileOp(t, st, fresh.Session.ID, 4)
	must(t, err)
	g := accept(t, ctx, st, fresh, cred, epoch)
	if _, ok, err := st.ClaimFileOperation(ctx, g.Conn); err != nil || ok {
		t.Fatalf("claimed before prepared: %v %v", ok, err)
	}
	_, err = st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	if _, ok, err := st.ClaimFileOperation(ctx, g.Conn); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	_, err = st.FinishFileOperation(ctx, op.ID, store.FileResult{})
	must(t, err)
	if i, _ := st.SessionIdleSince(ctx, fresh.Session.ID); i.Idle {
		t.Fatal("idle without an ended Turn")
	}
}

// TestFileOperationBoundsAndEnds: the per-Session bound, a reused request
// id, the connection's close, terminal cleanup and another owner's sweep
// each end or refuse operations as documented.
func TestFileOperationBoundsAndEnds(t *testing.T) {
	st, ctx, epoch := owner(t)
	b, cred := storetest.RunningSession(t, st)
	first, err := fileOp(t, st, b.Session.ID, 2)
	must(t, err)
	_, err = fileOp(t, st, b.Session.ID, 2)
	must(t, err)
	_, err = fileOp(t, st, b.Session.ID, 2)
	wantClass(t, err, store.ErrSessionFileLimit)
	_, err = st.SubmitFileOperation(ctx, store.SubmitFileOperationParams{
		ID: newUUID(t), SessionID: b.Session.ID, RequestID: first.RequestID, Direction: store.FileDownload, PerSession: 9,
	})
	wantClass(t, err, store.ErrRequestIDReused)

	// A running operation ends with its connection.
	g := accept(t, ctx, st, b, cred, epoch)
	_, err = st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	claimed, ok, err := st.ClaimFileOperation(ctx, g.Conn)
	if err != nil || !ok || claimed.ID != first.ID {
		t.Fatalf("claim: %+v %v %v", claimed, ok, err)
	}
	_, err = st.CloseRuntimeConnection(ctx, g.Conn)
	must(t, err)
	ids, err := st.FailFileOperationsOfConnection(ctx, g.Conn)
	must(t, err)
	if len(ids) != 1 || ids[0] != first.ID {
		t.Fatalf("failed on close: %v", ids)
	}
	got, err := st.GetFileOperation(ctx, first.ID)
	must(t, err)
	if got.State != store.FileFailed || got.FailureCode != store.FileFailureRuntimeDisconnected {
		t.Fatalf("after close: %+v", got)
	}

	// Another owner epoch's sweep fails the pending operation of this one.
	next := takeover(t, st)
	ids, err = next.FailOrphanedFileOperations(ctx)
	must(t, err)
	if len(ids) != 1 {
		t.Fatalf("orphans: %v", ids)
	}
	got, err = next.GetFileOperation(ctx, ids[0])
	must(t, err)
	if got.FailureCode != store.FileFailureCoreRestarted {
		t.Fatalf("orphan: %+v", got)
	}

	// Terminal cleanup ends what is pending with the cause's code.
	op, err := next.SubmitFileOperation(ctx, store.SubmitFileOperationParams{
		ID: newUUID(t), SessionID: b.Session.ID, RequestID: newUUID(t), Direction: store.FileDownload, PerSession: 4,
	})
	must(t, err)
	_, err = next.RequestSessionDeletion(ctx, b.Session.ID)
	must(t, err)
	got, err = next.GetFileOperation(ctx, op.ID)
	must(t, err)
	if got.State != store.FileFailed || got.FailureCode != store.TurnFailureSessionDeleted {
		t.Fatalf("after deletion: %+v", got)
	}
	_, err = fileOp(t, next, b.Session.ID, 4)
	wantClass(t, err, store.ErrSessionNotActive)
}

// takeover expires st's lease and takes it with a new owner epoch, as a
// standby does after the active Core died.
func takeover(t *testing.T, st *storetest.Owned) *storetest.Owned {
	t.Helper()
	ctx := t.Context()
	_, err := st.Pool().Exec(ctx, `UPDATE execution_lease SET expires_at = now() - interval '1 second'`)
	must(t, err)
	epoch, err := st.NextOwnerEpoch(ctx)
	must(t, err)
	ok, err := st.AcquireLease(ctx, uuid.New(), epoch, time.Hour)
	if err != nil || !ok {
		t.Fatalf("take over: %v %v", ok, err)
	}
	return storetest.As(st.Store, epoch)
}

// TestFileAdmissionsRacingKeepTheBound: many admissions at once for one
// Session pass the per-Session bound exactly as often as it allows.
func TestFileAdmissionsRacingKeepTheBound(t *testing.T) {
	st, _, _ := owner(t)
	b, _ := storetest.RunningSession(t, st)
	const bound, tries = 3, 12
	errs := make(chan error, tries)
	for range tries {
		go func() {
			_, err := fileOp(t, st, b.Session.ID, bound)
			errs <- err
		}()
	}
	admitted := 0
	for range tries {
		err := <-errs
		switch {
		case err == nil:
			admitted++
		case errors.Is(err, store.ErrSessionFileLimit):
		default:
			t.Fatal(err)
		}
	}
	if admitted != bound {
		t.Fatalf("%d admitted, want the bound %d", admitted, bound)
	}
}
