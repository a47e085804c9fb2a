package audit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"berth.dev/core/store"
)

// Retention bounds (--audit-retention): events are kept DefaultRetention
// (90 days) unless configured, never less than MinRetention; 0 is
// refused, not "forever".
const (
	DefaultRetention = 2160 * time.Hour
	MinRetention     = 24 * time.Hour
	// SweepInterval is how often the owner sweeps.
	SweepInterval = time.Hour
)

// CheckRetention refuses a retention under MinRetention (0 included).
func CheckRetention(d time.Duration) error {
	if d < MinRetention {
		return fmt.Errorf("audit retention %s: must be at least %s", d, MinRetention)
	}
	return nil
}

// Expirer is the owner's sweep write: the store's Owner.
type Expirer interface {
	ExpireAuditEvents(ctx context.Context, retention time.Duration) (int64, error)
}

// Sweep deletes every event older than retention, a batch
// (store.AuditSweepBatch) per transaction until a batch is short, and
// returns how many it deleted.
func Sweep(ctx context.Context, o Expirer, retention time.Duration) (int64, error) {
	var total int64
	for {
		n, err := o.ExpireAuditEvents(ctx, retention)
		total += n
		if err != nil {
			return total, err
		}
		if n < store.AuditSweepBatch {
			return total, nil
		}
	}
}

// RunSweeper sweeps at once and then every SweepInterval until ctx ends;
// it runs only while this Core is the owner (the daemon's owner group), and
// a failed sweep is logged and retried at the next tick. A superseded
// owner's sweep fails (store.ErrSuperseded) and its group stops it.
func RunSweeper(ctx context.Context, o Expirer, retention time.Duration, log *slog.Logger) error {
	t := time.NewTicker(SweepInterval)
	defer t.Stop()
	for {
		n, err := Sweep(ctx, o, retention)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.WarnContext(ctx, "audit sweep failed", "err", err)
		case n > 0:
			log.InfoContext(ctx, "audit events expired", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
