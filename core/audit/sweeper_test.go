package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"berth.dev/core/audit"
	"berth.dev/core/store"
)

// batches is an Expirer that deletes the given batch sizes in turn.
type batches struct {
	sizes []int64
	calls int
	err   error
}

func (b *batches) ExpireAuditEvents(_ context.Context, retention time.Duration) (int64, error) {
	if retention != audit.DefaultRetention {
		return 0, errors.New("wrong retention")
	}
	if b.calls == len(b.sizes) {
		return 0, b.err
	}
	b.calls++
	return b.sizes[b.calls-1], nil
}

// TestSweepRunsBatchesUntilShort: a sweep repeats full batches and stops
// after the first short one; a failure ends it with what it deleted.
func TestSweepRunsBatchesUntilShort(t *testing.T) {
	b := &batches{sizes: []int64{store.AuditSweepBatch, store.AuditSweepBatch, 7, 99}}
	n, err := audit.Sweep(t.Context(), b, audit.DefaultRetention)
	if err != nil || n != 2*store.AuditSweepBatch+7 || b.calls != 3 {
		t.Fatalf("swept %d in %d batches (%v)", n, b.calls, err)
	}
	boom := errors.New("database gone")
	b = &batches{sizes: []int64{store.AuditSweepBatch}, err: boom}
	if n, err := audit.Sweep(t.Context(), b, audit.DefaultRetention); !errors.Is(err, boom) || n != store.AuditSweepBatch {
		t.Fatalf("swept %d (%v), want the batch and the failure", n, err)
	}
	if audit.CheckRetention(0) == nil || audit.CheckRetention(23*time.Hour) == nil || audit.CheckRetention(audit.MinRetention) != nil {
		t.Fatal("CheckRetention does not hold the 24h floor")
	}
}
