package store_test

import (
	"errors"
	"testing"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

// TestConnectionWritesAreBoundToTheirGrant: every write made for a
// Runtime connection takes its grant (store.RuntimeConn). The grant of a
// connection a reconnect replaced is fenced by the SQL, so a stale
// connection reports and claims nothing and its close touches the new
// connection's Turns not at all; the zero value, which no accept made, is
// refused before any query (ErrNoRuntimeConn).
func TestConnectionWritesAreBoundToTheirGrant(t *testing.T) {
	st, ctx, epoch := owner(t)
	b, cred := storetest.RunningSession(t, st)
	own := st.AsOwner(epoch)

	old := accept(t, ctx, st, b, cred, epoch)
	_, err := st.MarkRuntimePrepared(ctx, old.Conn)
	must(t, err)
	first := turnParams(t, b.Session.ID, "echo one")
	_, _, err = st.SubmitTurn(ctx, first)
	must(t, err)
	if _, ok, err := own.ClaimNextTurn(ctx, old.Conn); err != nil || !ok {
		t.Fatalf("claim on the first connection: ok=%v err=%v", ok, err)
	}
	// A reconnect replaces the first connection: its grant is stale.
	cur := accept(t, ctx, st, b, cred, epoch)
	if cur.Conn.SessionID() != b.Session.ID || cur.Conn.ID() != cur.Connection.ID || old.Conn == cur.Conn {
		t.Fatalf("grant's connection = %v %v, want session %v and connection %v", cur.Conn.ID(), cur.Conn.SessionID(), b.Session.ID, cur.Connection.ID)
	}
	second := turnParams(t, b.Session.ID, "echo two")
	_, _, err = st.SubmitTurn(ctx, second)
	must(t, err)

	// The stale grant: fenced on every write.
	_, err = st.MarkRuntimePrepared(ctx, old.Conn)
	wantClass(t, err, errdefs.ErrNotFound)
	wantClass(t, st.TouchRuntimeConnection(ctx, old.Conn), errdefs.ErrNotFound)
	if _, ok, err := own.ClaimNextTurn(ctx, old.Conn); err != nil || ok {
		t.Fatalf("claim on the replaced connection: ok=%v err=%v, want nothing claimed", ok, err)
	}
	_, err = st.MarkTurnStarted(ctx, first.ID, old.Conn)
	wantClass(t, err, store.ErrTurnProtocol)
	wantClass(t, st.AppendTurnOutput(ctx, first.ID, old.Conn, store.StreamStdout, 0, []byte("x")), store.ErrTurnProtocol)
	_, err = st.FinishTurn(ctx, first.ID, old.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: new(int32)})
	wantClass(t, err, store.ErrTurnProtocol)

	// The current grant claims the queued Turn; closing the stale one
	// afterwards leaves it running and the current connection open.
	_, err = st.MarkRuntimePrepared(ctx, cur.Conn)
	must(t, err)
	turn, ok, err := own.ClaimNextTurn(ctx, cur.Conn)
	if err != nil || !ok || turn.ID != second.ID {
		t.Fatalf("claim on the current connection: ok=%v err=%v turn=%v, want %v", ok, err, turn.ID, second.ID)
	}
	ids, err := st.CloseRuntimeConnection(ctx, old.Conn)
	must(t, err)
	if len(ids) != 0 {
		t.Fatalf("closing the replaced connection unconfirmed %v", ids)
	}
	must(t, st.TouchRuntimeConnection(ctx, cur.Conn))
	wantTurn(t, ctx, st, second.ID, store.TurnRunning, "")

	// The zero value: refused, typed, before any query.
	var zero store.RuntimeConn
	for name, err := range map[string]error{
		"prepared": errOf(st.MarkRuntimePrepared(ctx, zero)),
		"touch":    st.TouchRuntimeConnection(ctx, zero),
		"close":    errOf(st.CloseRuntimeConnection(ctx, zero)),
		"claim":    errOf3(own.ClaimNextTurn(ctx, zero)),
		"started":  errOf(st.MarkTurnStarted(ctx, second.ID, zero)),
		"output":   st.AppendTurnOutput(ctx, second.ID, zero, store.StreamStdout, 0, []byte("x")),
		"finish":   errOf(st.FinishTurn(ctx, second.ID, zero, store.TurnResult{State: store.TurnCompleted, ExitCode: new(int32)})),
	} {
		if !errors.Is(err, store.ErrNoRuntimeConn) || !errdefs.IsInvalid(err) {
			t.Errorf("%s with the zero RuntimeConn: %v, want ErrNoRuntimeConn (invalid argument)", name, err)
		}
	}
	wantTurn(t, ctx, st, second.ID, store.TurnRunning, "")
}

func errOf[T any](_ T, err error) error          { return err }
func errOf3[T, U any](_ T, _ U, err error) error { return err }
