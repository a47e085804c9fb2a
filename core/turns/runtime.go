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

// Claim claims the next queued Turn of session for the Runtime connection
// conn under the store's owner epoch; ok is false when none is queued. A
// claimed Turn is delivered at most once.
func (s *Service) Claim(ctx context.Context, session, conn uuid.UUID) (store.Turn, bool, error) {
	return s.store.ClaimNextTurn(ctx, session, conn)
}

// Current reads Turn id for the connection running it (to see a
// cancellation request).
func (s *Service) Current(ctx context.Context, id uuid.UUID) (store.Turn, error) {
	return s.store.GetTurn(ctx, id)
}

// Started records that Turn id started on conn. A report that does not
// fit the Turn is store.ErrTurnProtocol.
func (s *Service) Started(ctx context.Context, id, conn uuid.UUID) error {
	_, err := s.store.MarkTurnStarted(ctx, id, conn)
	return err
}

// Output records a chunk of Turn id's output on stream at offset and wakes
// its readers. Chunks must be contiguous: anything else is
// store.ErrTurnProtocol.
func (s *Service) Output(ctx context.Context, id, conn uuid.UUID, stream int16, offset int64, data []byte) error {
	if err := s.store.AppendTurnOutput(ctx, id, conn, stream, offset, data); err != nil {
		return err
	}
	s.hub.Notify(id)
	return nil
}

// Finish records Turn id's result and wakes its readers and its Session.
func (s *Service) Finish(ctx context.Context, id, conn uuid.UUID, r store.TurnResult) (store.Turn, error) {
	t, err := s.store.FinishTurn(ctx, id, conn, r)
	if err != nil {
		return store.Turn{}, err
	}
	s.hub.Notify(t.ID, t.SessionID)
	return t, nil
}

// Unconfirmed wakes the readers of Turns that the end of their Runtime
// connection made unconfirmed (the store does that in the same
// transaction as the connection's end, store.AcceptRuntime and
// store.CloseRuntimeConnection), and their Sessions.
func (s *Service) Unconfirmed(ids ...uuid.UUID) { s.hub.Notify(ids...) }

// Notify wakes the waiters of keys in this process (Wait): the lifecycle
// worker announces an Environment's suspension transitions with it, so the
// gateway's connection of its Session reads the new compute phase at once.
func (s *Service) Notify(keys ...uuid.UUID) { s.hub.Notify(keys...) }

// Terminated wakes whoever waits on what a terminal cleanup changed
// (store.Termination): the Session's gateway connection, so it forwards
// the requested cancellation of the running Turn at once, and the readers
// of the Turns it ended or asked to cancel.
func (s *Service) Terminated(t store.Termination) {
	ids := append([]uuid.UUID{t.SessionID}, t.SettledTurns...)
	s.hub.Notify(append(ids, t.CancelRequested...)...)
}
