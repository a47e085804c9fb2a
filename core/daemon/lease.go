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

// waitForLease takes the execution lease, waiting while another Core holds it.
func waitForLease(ctx context.Context, st *store.Store, holder uuid.UUID, epoch uint64, ttl time.Duration, log *slog.Logger) error {
	logged := false
	for {
		ok, err := st.AcquireLease(ctx, holder, epoch, ttl)
		if err != nil {
			return fmt.Errorf("execution lease: %w", err)
		}
		if ok {
			return nil
		}
		if !logged {
			log.Info("another berth-core holds the execution lease; waiting")
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(ttl / 3):
		}
	}
}

// keepLease renews the lease every third of its lifetime until ctx ends
// (nil). When a renewal is refused, or renewals keep failing until the
// lease would have expired, it returns ErrLeaseLost.
func keepLease(ctx context.Context, st *store.Store, holder uuid.UUID, epoch uint64, ttl time.Duration, log *slog.Logger) error {
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
		ok, err := st.AcquireLease(rctx, holder, epoch, ttl)
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
