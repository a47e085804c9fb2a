package store_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

// owner returns a store acting for a lease-holding owner epoch.
func owner(t *testing.T) (*storetest.Owned, context.Context, uint64) {
	t.Helper()
	st, ctx := newStore(t)
	owned := storetest.Owner(t, st)
	return owned, ctx, owned.Epoch()
}

func turnParams(t testing.TB, session uuid.UUID, script string) store.SubmitTurnParams {
	return store.SubmitTurnParams{
		ID: newUUID(t), SessionID: session, RequestID: newUUID(t), RequestDigest: hash([]byte(script)),
		ShellScript: &script, WorkingDirectory: "/workspace",
		Input:   store.SealedCredential{Ciphertext: randomBytes(t, 20), Nonce: randomBytes(t, 12)},
		Timeout: time.Minute, QueueTimeout: time.Minute, MaxOutputBytes: 10,
	}
}

func accept(t *testing.T, ctx context.Context, st *storetest.Owned, b store.SessionBundle, cred []byte, epoch uint64) store.RuntimeGrant {
	t.Helper()
	g, err := st.AsOwner(epoch).AcceptRuntime(ctx, store.AcceptRuntimeParams{
		ConnectionID: newUUID(t), DeviceID: b.Allocation.DeviceID, Credential: runtimebootstrap.NewSecret(string(cred)), RuntimeVersion: "test\x00v1",
	})
	must(t, err)
	return g
}

func TestAcceptRuntimeChecksDeviceCredentialAndSettlement(t *testing.T) {
	st, ctx, epoch := owner(t)

	// Not settled yet: not admitted.
	node := storetest.EnabledNode(t, st)
	storetest.Present(t, st, node, 1)
	p := sessionParams(t, 5)
	cred := randomBytes(t, 32)
	p.CredentialDigest = hash(cred)
	_, err := st.CreateSession(ctx, p)
	must(t, err)
	params := store.AcceptRuntimeParams{ConnectionID: newUUID(t), DeviceID: p.DeviceID, Credential: runtimebootstrap.NewSecret(string(cred))}
	_, err = st.AcceptRuntime(ctx, params)
	wantClass(t, err, store.ErrRuntimeNotAdmitted)

	b, cred := storetest.RunningSession(t, st)
	for name, p := range map[string]store.AcceptRuntimeParams{
		"wrong credential": {ConnectionID: newUUID(t), DeviceID: b.Allocation.DeviceID, Credential: runtimebootstrap.NewSecret(string(randomBytes(t, 32)))},
		"unknown device":   {ConnectionID: newUUID(t), DeviceID: newUUID(t), Credential: runtimebootstrap.NewSecret(string(cred))},
		"other device":     {ConnectionID: newUUID(t), DeviceID: p.DeviceID, Credential: runtimebootstrap.NewSecret(string(cred))},
	} {
		_, err := st.AcceptRuntime(ctx, p)
		if !errors.Is(err, store.ErrRuntimeCredential) {
			t.Errorf("%s: %v, want ErrRuntimeCredential", name, err)
		}
	}
	// A standby's newer epoch does not hold the lease: it cannot accept
	// (and does not stop the holder, below).
	standby, err := st.NextOwnerEpoch(ctx)
	must(t, err)
	_, err = st.AsOwner(standby).AcceptRuntime(ctx, store.AcceptRuntimeParams{ConnectionID: newUUID(t), DeviceID: b.Allocation.DeviceID, Credential: runtimebootstrap.NewSecret(string(cred))})
	wantClass(t, err, store.ErrRuntimeNotAdmitted)

	g1 := accept(t, ctx, st, b, cred, epoch)
	if g1.Connection.Generation != 1 || g1.SessionID != b.Session.ID || g1.Connection.RuntimeVersion != "testv1" {
		t.Fatalf("grant = %+v", g1)
	}
	ready, err := st.RuntimeReadiness(ctx, []uuid.UUID{b.Allocation.ID})
	must(t, err)
	if r := ready[b.Allocation.ID]; !r.Connected || r.Prepared || r.Generation != 1 {
		t.Fatalf("readiness = %+v", r)
	}
	_, err = st.MarkRuntimePrepared(ctx, g1.Conn)
	must(t, err)

	// A Turn runs on the first connection; a reconnect replaces it and the
	// Turn becomes unconfirmed, never queued again.
	tp := turnParams(t, b.Session.ID, "true")
	_, _, err = st.SubmitTurn(ctx, tp)
	must(t, err)
	turn, ok, err := st.AsOwner(epoch).ClaimNextTurn(ctx, g1.Conn)
	must(t, err)
	if !ok || turn.ID != tp.ID || turn.State != store.TurnRunning {
		t.Fatalf("claim = %v %+v", ok, turn)
	}
	g2 := accept(t, ctx, st, b, cred, epoch)
	if g2.Connection.Generation != 2 || len(g2.Unconfirmed) != 1 || g2.Unconfirmed[0] != tp.ID {
		t.Fatalf("second grant = %+v", g2)
	}
	turn, err = st.GetTurn(ctx, tp.ID)
	must(t, err)
	if turn.State != store.TurnUnconfirmed || turn.FailureCode != "runtime_disconnected" || turn.EndedAt == nil {
		t.Fatalf("turn after reconnect = %+v", turn)
	}
	ready, err = st.RuntimeReadiness(ctx, []uuid.UUID{b.Allocation.ID})
	must(t, err)
	if r := ready[b.Allocation.ID]; !r.Connected || r.Prepared || r.Generation != 2 {
		t.Fatalf("readiness after reconnect = %+v", r)
	}
	// The old connection can report nothing any more.
	_, err = st.FinishTurn(ctx, tp.ID, g1.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: new(int32)})
	wantClass(t, err, store.ErrTurnProtocol)

	// Deleting the Session revokes the device.
	_, err = st.RequestSessionDeletion(ctx, b.Session.ID)
	must(t, err)
	_, err = st.AsOwner(epoch).AcceptRuntime(ctx, store.AcceptRuntimeParams{ConnectionID: newUUID(t), DeviceID: b.Allocation.DeviceID, Credential: runtimebootstrap.NewSecret(string(cred))})
	wantClass(t, err, store.ErrRuntimeRevoked)
}

func TestTurnsRunOnceInOrderWithBoundedOutput(t *testing.T) {
	st, ctx, epoch := owner(t)
	b, cred := storetest.RunningSession(t, st)

	first := turnParams(t, b.Session.ID, "echo one")
	second := turnParams(t, b.Session.ID, "echo two")
	for _, p := range []store.SubmitTurnParams{first, second} {
		_, created, err := st.SubmitTurn(ctx, p)
		must(t, err)
		if !created {
			t.Fatal("first submit not created")
		}
	}
	// A retry returns the first Turn; the same request id with another
	// command is ErrExists.
	retry := first
	retry.ID = newUUID(t)
	got, created, err := st.SubmitTurn(ctx, retry)
	must(t, err)
	if created || got.ID != first.ID {
		t.Fatalf("retry created=%v id=%v", created, got.ID)
	}
	other := turnParams(t, b.Session.ID, "echo other")
	other.RequestID = first.RequestID
	_, _, err = st.SubmitTurn(ctx, other)
	wantClass(t, err, errdefs.ErrExists)

	g := accept(t, ctx, st, b, cred, epoch)
	// Not prepared: nothing is claimed.
	if _, ok, err := st.AsOwner(epoch).ClaimNextTurn(ctx, g.Conn); err != nil || ok {
		t.Fatalf("claim before prepared: ok=%v err=%v", ok, err)
	}
	_, err = st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)

	// Concurrent claims: exactly one wins, and it is the first Turn.
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		claims []uuid.UUID
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turn, ok, err := st.AsOwner(epoch).ClaimNextTurn(ctx, g.Conn)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				claims = append(claims, turn.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(claims) != 1 || claims[0] != first.ID {
		t.Fatalf("claims = %v, want only %v", claims, first.ID)
	}

	_, err = st.MarkTurnStarted(ctx, first.ID, g.Conn)
	must(t, err)
	must(t, st.AppendTurnOutput(ctx, first.ID, g.Conn, store.StreamStdout, 0, []byte("hello ")))
	// Out of order, without a connection's grant, beyond the bound: refused.
	wantClass(t, st.AppendTurnOutput(ctx, first.ID, g.Conn, store.StreamStdout, 0, []byte("x")), store.ErrTurnProtocol)
	wantClass(t, st.AppendTurnOutput(ctx, first.ID, store.RuntimeConn{}, store.StreamStdout, 6, []byte("x")), store.ErrNoRuntimeConn)
	wantClass(t, st.AppendTurnOutput(ctx, first.ID, g.Conn, store.StreamStdout, 6, []byte("world")), store.ErrTurnProtocol)
	must(t, st.AppendTurnOutput(ctx, first.ID, g.Conn, store.StreamStderr, 0, []byte("e")))
	must(t, st.AppendTurnOutput(ctx, first.ID, g.Conn, store.StreamStdout, 6, []byte("worl")))

	code := int32(3)
	done, err := st.FinishTurn(ctx, first.ID, g.Conn, store.TurnResult{
		State: store.TurnCompleted, ExitCode: &code, StdoutBytes: 11, StderrBytes: 1,
	})
	must(t, err)
	if done.State != store.TurnCompleted || *done.ExitCode != 3 || !done.OutputTruncated ||
		done.StdoutRecorded != 10 || done.StderrRecorded != 1 || done.StdoutBytes != 11 || done.EndedAt == nil {
		t.Fatalf("finished = %+v", done)
	}
	chunks, err := st.ReadTurnOutput(ctx, first.ID, 0, 10)
	must(t, err)
	var out, errb bytes.Buffer
	for _, c := range chunks {
		if c.Stream == store.StreamStdout {
			out.Write(c.Data)
		} else {
			errb.Write(c.Data)
		}
	}
	if out.String() != "hello worl" || errb.String() != "e" || len(chunks) != 3 {
		t.Fatalf("output %q %q (%d chunks)", out.String(), errb.String(), len(chunks))
	}
	// Finished twice: refused; the second Turn runs next.
	_, err = st.FinishTurn(ctx, first.ID, g.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code})
	wantClass(t, err, store.ErrTurnProtocol)
	next, ok, err := st.AsOwner(epoch).ClaimNextTurn(ctx, g.Conn)
	must(t, err)
	if !ok || next.ID != second.ID {
		t.Fatalf("next claim = %v %v", ok, next.ID)
	}
	// Closing the connection leaves it unconfirmed.
	ids, err := st.CloseRuntimeConnection(ctx, g.Conn)
	must(t, err)
	if len(ids) != 1 || ids[0] != second.ID {
		t.Fatalf("unconfirmed = %v", ids)
	}
	list, err := st.ListTurns(ctx, b.Session.ID, 0, 10)
	must(t, err)
	if len(list) != 2 || list[0].ID != first.ID || list[1].State != store.TurnUnconfirmed {
		t.Fatalf("list = %+v", list)
	}
	// A full page of the largest size and the row past it (a pager's
	// limit), but no more.
	list, err = st.ListTurns(ctx, b.Session.ID, 0, store.MaxPageSize+1)
	if err != nil || len(list) != 2 {
		t.Fatalf("list with the largest limit = %d turns, %v", len(list), err)
	}
	_, err = st.ListTurns(ctx, b.Session.ID, 0, store.MaxPageSize+2)
	wantClass(t, err, errdefs.ErrInvalid)
}

func TestQueuedTurnsExpireAndCancel(t *testing.T) {
	st, ctx, epoch := owner(t)
	standby, err := st.NextOwnerEpoch(ctx)
	must(t, err)
	b, _ := storetest.RunningSession(t, st)

	short := turnParams(t, b.Session.ID, "sleep")
	short.QueueTimeout = time.Millisecond
	_, _, err = st.SubmitTurn(ctx, short)
	must(t, err)
	cancel := turnParams(t, b.Session.ID, "cancel me")
	_, _, err = st.SubmitTurn(ctx, cancel)
	must(t, err)
	time.Sleep(20 * time.Millisecond)

	// An epoch without the lease expires nothing.
	refs, err := st.AsOwner(standby).ExpireQueuedTurns(ctx)
	must(t, err)
	if len(refs) != 0 {
		t.Fatalf("old owner expired %v", refs)
	}
	refs, err = st.AsOwner(epoch).ExpireQueuedTurns(ctx)
	must(t, err)
	if len(refs) != 1 || refs[0].ID != short.ID {
		t.Fatalf("expired %v, want %v", refs, short.ID)
	}
	got, err := st.GetTurn(ctx, short.ID)
	must(t, err)
	if got.State != store.TurnFailed || got.FailureCode != "runtime_not_ready" {
		t.Fatalf("expired turn = %+v", got)
	}
	c, err := st.RequestTurnCancel(ctx, cancel.ID)
	must(t, err)
	if c.State != store.TurnCancelled || c.CancelRequestedAt == nil || c.EndedAt == nil {
		t.Fatalf("cancelled = %+v", c)
	}
	again, err := st.RequestTurnCancel(ctx, cancel.ID)
	must(t, err)
	if !again.CancelRequestedAt.Equal(*c.CancelRequestedAt) || again.State != store.TurnCancelled {
		t.Fatalf("cancel twice changed the turn: %+v", again)
	}

	// After deletion: no new Turn, and queued ones fail session_deleted.
	queued := turnParams(t, b.Session.ID, "queued")
	_, _, err = st.SubmitTurn(ctx, queued)
	must(t, err)
	_, err = st.RequestSessionDeletion(ctx, b.Session.ID)
	must(t, err)
	_, _, err = st.SubmitTurn(ctx, turnParams(t, b.Session.ID, "late"))
	wantClass(t, err, store.ErrSessionNotActive)
	_, err = st.AsOwner(epoch).ExpireQueuedTurns(ctx)
	must(t, err)
	got, err = st.GetTurn(ctx, queued.ID)
	must(t, err)
	if got.State != store.TurnFailed || got.FailureCode != "session_deleted" {
		t.Fatalf("turn of deleted session = %+v", got)
	}
}

// TestTurnReportsItsQueueTimeout: a Turn reads back the queue timeout it
// was submitted with, to the millisecond (from its queue deadline and its
// submission, one database clock reading), also through a list.
func TestTurnReportsItsQueueTimeout(t *testing.T) {
	st, ctx, _ := owner(t)
	b, _ := storetest.RunningSession(t, st)
	p := turnParams(t, b.Session.ID, "true")
	p.QueueTimeout = 1234 * time.Millisecond
	got, _, err := st.SubmitTurn(ctx, p)
	must(t, err)
	if got.QueueTimeout != p.QueueTimeout {
		t.Fatalf("submitted Turn's queue timeout %v, want %v", got.QueueTimeout, p.QueueTimeout)
	}
	list, err := st.ListTurns(ctx, b.Session.ID, 0, store.MaxPageSize+1)
	must(t, err)
	if len(list) != 1 || list[0].QueueTimeout != p.QueueTimeout {
		t.Fatalf("listed %+v", list)
	}
}
