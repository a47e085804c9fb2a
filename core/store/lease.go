package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// Lease is the execution lease: which Core (holder, owner epoch) is the
// single active one, and until when by the database clock.
type Lease struct {
	Holder     uuid.UUID
	OwnerEpoch uint64
	AcquiredAt time.Time
	RenewedAt  time.Time
	ExpiresAt  time.Time
	// Expired is ExpiresAt compared with the database clock when read.
	Expired bool
	// Locked: the holder took or renewed it holding the owner lock
	// (OwnerLock), so a Core that holds the lock may take it over early.
	Locked bool
}

// AcquireLease takes the execution lease for holder under epoch for ttl,
// by the database clock, or renews it (a new expiry of now()+ttl) when
// holder already holds it under epoch. It reports false, with no error,
// while another Core holds an unexpired lease: the caller waits and tries
// again, or exits.
//
// epoch must have been issued by NextOwnerEpoch (ErrInvalid otherwise).
// Taking an expired lease needs an epoch newer than its last holder's, so a
// Core whose epoch another Core has superseded can never become active
// again: that, and a holder other than the one that used the epoch, is
// ErrFenced; the caller needs a new epoch.
func (s *Store) AcquireLease(ctx context.Context, holder uuid.UUID, epoch uint64, ttl time.Duration) (bool, error) {
	const op = "acquire lease"
	e, micros, err := leaseParams(holder, epoch, ttl)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	_, err = s.q.AcquireLease(ctx, db.AcquireLeaseParams{Holder: holder, OwnerEpoch: e, TTLMicros: micros})
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, wrap(op, err)
	}
	return s.leaseRefused(ctx, op, holder, e)
}

// leaseParams checks a lease acquisition's arguments (AcquireLease,
// OwnerLock.AcquireLease) and returns the epoch and lifetime as the
// queries take them.
func leaseParams(holder uuid.UUID, epoch uint64, ttl time.Duration) (e, micros int64, err error) {
	if holder == uuid.Nil {
		return 0, 0, errdefs.Invalid("holder", "must not be the nil UUID")
	}
	if e, err = epochParam(epoch); err != nil {
		return 0, 0, err
	}
	if micros, err = ttlMicros("ttl", ttl); err != nil {
		return 0, 0, err
	}
	return e, micros, nil
}

// leaseRefused explains a lease acquisition that took nothing: false
// while another Core holds it, ErrFenced when epoch was superseded.
func (s *Store) leaseRefused(ctx context.Context, op string, holder uuid.UUID, e int64) (bool, error) {
	// Not taken: find out why, to tell waiting from being superseded. The
	// reads may race with other Cores; they only choose the answer to a
	// refusal that has already happened.
	inst, err := s.q.GetInstallation(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("%s: %w", op, errNotClaimed)
	}
	if err != nil {
		return false, wrap(op, err)
	}
	if e > inst.OwnerEpoch {
		return false, fmt.Errorf("%s: %w", op, errdefs.Invalid("owner_epoch", "was never issued"))
	}
	cur, err := s.q.GetLease(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // the row is never deleted; not taken either way
	}
	if err != nil {
		return false, wrap(op, err)
	}
	if e < cur.OwnerEpoch || (e == cur.OwnerEpoch && holder != cur.Holder) {
		return false, fmt.Errorf("%s: owner epoch superseded: %w", op, errdefs.ErrFenced)
	}
	return false, nil
}

// ReleaseLease ends holder's lease under epoch now, so another Core need
// not wait for it to expire. It does nothing when holder does not hold the
// lease (any more): releasing is safe to repeat.
func (s *Store) ReleaseLease(ctx context.Context, holder uuid.UUID, epoch uint64) error {
	e, err := epochParam(epoch)
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	if _, err := s.q.ReleaseLease(ctx, db.ReleaseLeaseParams{Holder: holder, OwnerEpoch: e}); err != nil {
		return wrap("release lease", err)
	}
	return nil
}

// GetLease returns the execution lease, ErrNotFound when no Core ever took
// it.
func (s *Reader) GetLease(ctx context.Context) (Lease, error) {
	r, err := s.q.GetLease(ctx)
	if err != nil {
		return Lease{}, wrap("get lease", err)
	}
	return Lease{Holder: r.Holder, OwnerEpoch: uint64(r.OwnerEpoch), AcquiredAt: r.AcquiredAt,
		RenewedAt: r.RenewedAt, ExpiresAt: r.ExpiresAt, Expired: r.Expired, Locked: r.Locked}, nil
}

// ErrSuperseded is the class (errdefs.ErrFenced) of a lifecycle write by a
// Core whose owner epoch does not hold the unexpired execution lease: a
// newer Core took the lease over, or the lease lapsed and was not renewed.
// Nothing was written. The caller stops acting as owner; it never retries
// the write under the same epoch with hope.
var ErrSuperseded = fmt.Errorf("owner epoch does not hold the execution lease: %w", errdefs.ErrFenced)

// Owner is the owner-bound store: the Store acting for one owner epoch.
// It alone has the fenced lifecycle writes (CreateSession,
// RequestSessionDeletion, AllocatePending, ClaimCreate,
// RecordCreateOutcome, ResolveCreateFailure, RequestCleanup, RecordCleanup,
// Release), the Turn claims and sweeps, Runtime admission and node
// presence, so a write without an owner epoch does not compile. Each one
// checks, in its own transaction and by the database clock, that the epoch
// holds the unexpired execution lease, and is ErrSuperseded otherwise.
// It has no reads: a consumer that also reads is given a Reader beside it.
//
// The fence is the lease row, not the installation's newest epoch: a
// standby Core issues its epoch before it waits for the lease, and that
// must not stop the active Core, while a Core whose lease another epoch
// took over (or that lapsed) is fenced at its next write, also before it
// notices the loss itself.
type Owner struct {
	handle
	epoch uint64
}

// AsOwner returns the Store acting for owner epoch epoch.
func (s *Store) AsOwner(epoch uint64) *Owner { return &Owner{handle: s.handle, epoch: epoch} }

// Epoch returns the owner epoch the Owner writes for.
func (s *Owner) Epoch() uint64 { return s.epoch }

// ownedTx runs fn in one transaction after the owner fence (FenceOwner),
// which holds the lease row against a takeover until the transaction ends.
func (s *Owner) ownedTx(ctx context.Context, fn func(q *db.Queries) error) error {
	return s.inTx(ctx, func(q *db.Queries) error {
		if err := fenceOwner(ctx, q, s.epoch); err != nil {
			return err
		}
		return fn(q)
	})
}

// fenceOwner is ErrSuperseded unless epoch holds the unexpired execution
// lease.
func fenceOwner(ctx context.Context, q *db.Queries, epoch uint64) error {
	e, err := epochParam(epoch)
	if err != nil {
		return ErrSuperseded
	}
	if _, err := q.FenceOwner(ctx, e); errors.Is(err, pgx.ErrNoRows) {
		return ErrSuperseded
	} else if err != nil {
		return err
	}
	return nil
}
