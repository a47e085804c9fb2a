package turns

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// The Runtime side of Turns. The Runtime gateway (core/gateway) records
// what a Runtime reports only through these methods: this package is the
// one writer of Turn state, and the one that wakes whoever waits on a
// Turn or a Session (the admin API's output streams, the gateway's
// dispatch loop).

// Wait returns a channel that is closed at the next change of key (a
// Session or Turn id): a Turn queued, cancelled, reported or swept.
func (s *Service) Wait(key uuid.UUID) <-chan struct{} { return s.hub.Wait(key) }

// Claim claims the next queued Turn of conn's Session for the Runtime
// connection conn under the store's owner epoch; ok is false when none is
// queued. A claimed Turn is delivered at most once.
func (s *Service) Claim(ctx context.Context, conn store.RuntimeConn) (store.Turn, bool, error) {
	return s.store.ClaimNextTurn(ctx, conn)
}

// Current reads Turn id for the connection running it (to see a
// cancellation request).
func (s *Service) Current(ctx context.Context, id uuid.UUID) (store.Turn, error) {
	return s.store.GetTurn(ctx, id)
}

// Started records that Turn id started on conn. A report that does not
// fit the Turn is store.ErrTurnProtocol.
func (s *Service) Started(ctx context.Context, id uuid.UUID, conn store.RuntimeConn) error {
	_, err := s.store.MarkTurnStarted(ctx, id, conn)
	return err
}

// Output records a chunk of Turn id's output on stream at offset and wakes
// its readers. Chunks must be contiguous: anything else is
// store.ErrTurnProtocol.
func (s *Service) Output(ctx context.Context, id uuid.UUID, conn store.RuntimeConn, stream int16, offset int64, data []byte) error {
	if err := s.store.AppendTurnOutput(ctx, id, conn, stream, offset, data); err != nil {
		return err
	}
	s.hub.Notify(id)
	return nil
}

// Finish records Turn id's result and wakes its readers and its Session.
func (s *Service) Finish(ctx context.Context, id uuid.UUID, conn store.RuntimeConn, r store.TurnResult) (store.Turn, error) {
	t, err := s.store.FinishTurn(ctx, id, conn, r)
	if err != nil {
		return store.Turn{}, err
	}
	s.hub.Notify(t.ID, t.SessionID)
	return t, nil
}

// ConnectionOpened records a Runtime's connection (store.AcceptRuntime:
// the device credential, the allocation's settled creation and compute
// phase checked, the owner epoch fenced). Accepting it ends the
// allocation's previous connection, whose running Turn becomes
// unconfirmed in the same transaction; their readers are woken. Its
// refusals are the store's (ErrRuntimeCredential, ErrRuntimeRevoked,
// ErrRuntimeNotAdmitted).
func (s *Service) ConnectionOpened(ctx context.Context, p store.AcceptRuntimeParams) (store.RuntimeGrant, error) {
	g, err := s.store.AcceptRuntime(ctx, p)
	if err != nil {
		return store.RuntimeGrant{}, err
	}
	s.hub.Notify(g.Unconfirmed...)
	return g, nil
}

// ConnectionClosed records the end of Runtime connection conn
// (store.CloseRuntimeConnection): the Turn running on it becomes
// unconfirmed in the same transaction. It wakes the Turns' readers and
// conn's Session, and returns the Turns it made unconfirmed. Closing
// twice changes nothing the second time.
func (s *Service) ConnectionClosed(ctx context.Context, conn store.RuntimeConn) ([]uuid.UUID, error) {
	ids, err := s.store.CloseRuntimeConnection(ctx, conn)
	if err != nil {
		return nil, err
	}
	s.hub.Notify(append(ids, conn.SessionID())...)
	return ids, nil
}

// Notify wakes the waiters of keys in this process (Wait): core/suspension
// announces an Environment's compute-phase transitions with it, so the
// gateway's connection of its Session reads the new phase at once.
func (s *Service) Notify(keys ...uuid.UUID) { s.hub.Notify(keys...) }

// Terminated wakes whoever waits on what a terminal cleanup changed
// (store.Termination): the Session's gateway connection, so it forwards
// the requested cancellation of the running Turn at once, and the readers
// of the Turns it ended or asked to cancel.
func (s *Service) Terminated(t store.Termination) {
	ids := append([]uuid.UUID{t.SessionID}, t.SettledTurns...)
	s.hub.Notify(append(ids, t.CancelRequested...)...)
}
