package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
)

// OwnerLock is the owner lock (migration 0028): a session-level advisory
// lock on a connection of its own, outside the pool, which the active Core
// holds while it holds the execution lease. PostgreSQL releases it when
// the connection ends (the process died, its connection was reset, or
// Close after a planned stop), so a standby waiting on it (Wait) learns at
// once, and may then take over the lease before it expires
// (AcquireLease): a lease acquired under the lock is recorded locked, and
// only a locked lease is taken over early. The newer owner epoch fences
// whatever the previous holder still writes.
//
// The lock only ever speeds a takeover up; the lease's expiry stays the
// rule. A lock whose session PostgreSQL has not yet seen die (a host
// that lost power: the server notices at its TCP keepalive) does not keep
// a standby waiting past the lease's expiry: AcquireLease without the
// lock takes an expired lease, and renews it, recorded unlocked, so no
// one takes it over early. Its methods are safe for concurrent use; each
// runs on the one connection.
type OwnerLock struct {
	st  *Store
	cfg *pgx.ConnConfig

	mu   sync.Mutex
	conn *pgx.Conn // nil: none (never dialled, lost or closed)
	held bool      // this connection holds the lock
}

// OwnerLock returns the owner lock, not held.
func (s *Store) OwnerLock() *OwnerLock {
	return &OwnerLock{st: s, cfg: s.pool.Config().ConnConfig.Copy()}
}

// connect dials the lock's connection when it has none; l.mu is held.
func (l *OwnerLock) connect(ctx context.Context) (*db.Queries, error) {
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := pgx.ConnectConfig(ctx, l.cfg)
		if err != nil {
			return nil, wrap("owner lock connection", err)
		}
		l.conn = conn
	}
	return db.New(l.conn), nil
}

// drop closes the connection after an error that may have broken it: the
// lock is gone with it. l.mu is held.
func (l *OwnerLock) drop() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
	l.held = false
}

// Try takes the lock when no other session holds it; false when one does.
// Held already (its connection open), it asks nothing: a connection that
// died is found by the next statement on it, which drops it.
func (l *OwnerLock) Try(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held && l.conn != nil && !l.conn.IsClosed() {
		return true, nil
	}
	q, err := l.connect(ctx)
	if err != nil {
		return false, err
	}
	ok, err := q.TryOwnerLock(ctx)
	if err != nil {
		l.drop()
		return false, wrap("try owner lock", err)
	}
	l.held = ok
	return ok, nil
}

// Wait waits until this session holds the lock (at once when it does), or
// ctx ends.
func (l *OwnerLock) Wait(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, err := l.connect(ctx)
	if err != nil {
		return err
	}
	if err := q.WaitOwnerLock(ctx); err != nil {
		l.drop()
		return wrap("wait for owner lock", err)
	}
	l.held = true
	return nil
}

// AcquireLease takes or renews the lease for holder under epoch. Holding
// the lock (or taking it now: a lost connection is dialled again), it runs
// on the lock's connection: the lease is recorded locked, and an
// unexpired locked lease of an older epoch is taken over (its holder's
// lock is gone: this session holds it). Without the lock (another session
// holds it) it is Store.AcquireLease: an expired lease is taken, its own
// renewed, recorded unlocked, and nothing is taken over early.
func (l *OwnerLock) AcquireLease(ctx context.Context, holder uuid.UUID, epoch uint64, ttl time.Duration) (bool, error) {
	const op = "acquire lease"
	e, micros, err := leaseParams(holder, epoch, ttl)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	held, err := l.Try(ctx)
	if err != nil {
		return false, err
	}
	if !held {
		return l.st.AcquireLease(ctx, holder, epoch, ttl)
	}
	l.mu.Lock()
	q, err := l.connect(ctx)
	if err == nil {
		_, err = q.AcquireLockedLease(ctx, db.AcquireLockedLeaseParams{Holder: holder, OwnerEpoch: e, TTLMicros: micros})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			l.drop()
		}
	}
	l.mu.Unlock()
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return false, wrap(op, err)
	}
	return l.st.leaseRefused(ctx, op, holder, e)
}

// Close ends the lock's connection, which releases the lock. Release the
// lease first (Store.ReleaseLease) at a planned stop.
func (l *OwnerLock) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop()
}
