package turns

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/store"
)

// The Runtime side of Turns. The Runtime gateway (core/gateway) records
// what a Runtime reports only through these methods: this package is the
// one writer of Turn state, and the one that publishes its changes
// (events.Turn, events.Session) to whoever waits on a Turn or a Session
// (the admin API's output streams, the gateway's dispatch loop).

// changed publishes, after the commit, a change of Session session (none
// when uuid.Nil) and of turns.
func (s *Service) changed(session uuid.UUID, turns ...uuid.UUID) {
	evs := make([]events.Event, 0, len(turns)+1)
	if session != uuid.Nil {
		evs = append(evs, events.Event{Kind: events.Session, ID: session})
	}
	for _, id := range turns {
		evs = append(evs, events.Event{Kind: events.Turn, ID: id})
	}
	s.bus.Publish(evs...)
}

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
	s.changed(uuid.Nil, id)
	return nil
}

// Finish records Turn id's result and wakes its readers and its Session.
func (s *Service) Finish(ctx context.Context, id uuid.UUID, conn store.RuntimeConn, r store.TurnResult) (store.Turn, error) {
	t, err := s.store.FinishTurn(ctx, id, conn, r)
	if err != nil {
		return store.Turn{}, err
	}
	s.changed(t.SessionID, t.ID)
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
	s.changed(uuid.Nil, g.Unconfirmed...)
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
	s.changed(conn.SessionID(), ids...)
	return ids, nil
}
