package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

// waitForLease takes the execution lease through the owner lock, waiting
// while another Core holds it: on the lock itself, which PostgreSQL hands
// over the moment the active Core's lock connection ends (its death or
// its planned stop), and then, holding the lock, takes over the lease at
// once when the previous holder held the lock too. Every third of the
// lease's lifetime it also tries the lease without the lock, which takes
// it once expired: a lock whose dead session PostgreSQL has not noticed
// yet, or a holder of an earlier version, never keeps it waiting longer
// than the lease did.
func waitForLease(ctx context.Context, lock *store.OwnerLock, holder uuid.UUID, epoch uint64, ttl time.Duration, log *slog.Logger) error {
	logged := false
	for {
		got, err := lock.Try(ctx)
		if err != nil {
			return fmt.Errorf("execution lease: %w", err)
		}
		if !got {
			if !logged {
				log.Info("another berth-core holds the execution lease; waiting")
				logged = true
			}
			wctx, cancel := context.WithTimeout(ctx, ttl/3)
			err := lock.Wait(wctx)
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			_ = err // a wait past ttl/3 ends here; the lease is tried below
		}
		ok, err := lock.AcquireLease(ctx, holder, epoch, ttl)
		if err != nil {
			return fmt.Errorf("execution lease: %w", err)
		}
		if ok {
			return nil
		}
		if got {
			// The lock is ours and the lease is not: its holder took it
			// without the lock. It is taken once it expired.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(ttl / 3):
			}
		}
	}
}

// keepLease renews the lease through the owner lock every third of its
// lifetime until ctx ends (nil): under the lock while it holds it (taking
// it back after its connection was lost, when no other Core took it),
// else unlocked. When a renewal is refused (a standby holding the lock
// took a locked lease over), or renewals keep failing until the lease
// would have expired, it returns ErrLeaseLost.
func keepLease(ctx context.Context, lock *store.OwnerLock, holder uuid.UUID, epoch uint64, ttl time.Duration, log *slog.Logger) error {
	ticker := time.NewTicker(ttl / 3)
	defer ticker.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		// A renewal may take until the lease would expire: one slow query
		// (PostgreSQL busy) that lands in time keeps the lease, where
		// cutting it at the next tick would let the lease lapse.
		budget := max(time.Until(last.Add(ttl)), ttl/3)
		began := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, budget)
		ok, err := lock.AcquireLease(rctx, holder, epoch, ttl)
		rcancel()
		switch {
		case ctx.Err() != nil:
			return nil // stopping: the renewal was cut short, not refused
		case err == nil && ok:
			if took := time.Since(began); took > ttl/3 {
				log.Warn("renewing the execution lease was slow", "took", took.Round(time.Millisecond), "ttl", ttl)
			}
			last = time.Now()
		case err == nil || errdefs.IsFenced(err) || time.Since(last) > ttl:
			log.Error("lost the execution lease; stopping")
			return ErrLeaseLost
		default:
			log.Warn("renewing the execution lease failed; retrying", "error", err.Error())
		}
	}
}
