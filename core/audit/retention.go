package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// RecordRetention records audit.retention (Core's own decision, reason
// retention_configured; detail retention_seconds) when retention differs
// from the last one recorded, or none is: the trail says how long it
// keeps what it holds, and since when. The owner calls it when its sweeper
// starts. An unchanged retention records nothing.
func RecordRetention(ctx context.Context, r Lister, w Store, retention time.Duration) (bool, error) {
	far := time.Now().Add(24 * time.Hour)
	var last *store.AuditEvent
	after := store.AuditCursor{}
	for {
		page, err := r.ListAuditEvents(ctx, store.AuditFilter{ActionPrefix: "audit.retention", End: &far}, after, 100)
		if err != nil {
			return false, fmt.Errorf("record audit retention: %w", err)
		}
		if len(page) > 0 {
			last = &page[len(page)-1]
			after = store.AuditCursor{OccurredAt: last.OccurredAt, ID: last.ID}
		}
		if len(page) < 100 {
			break
		}
	}
	seconds := int64(retention / time.Second)
	if last != nil && last.Detail["retention_seconds"] == float64(seconds) {
		return false, nil
	}
	id, err := uuid.NewRandom()
	if err != nil {
		return false, fmt.Errorf("record audit retention: %w", err)
	}
	if err := w.RecordAuditEvent(ctx, Core("retention_configured"), store.AuditEntry{
		ID: id, Kind: store.AuditDecision, Action: "audit.retention", Outcome: "ok",
		Detail: map[string]any{"retention_seconds": seconds},
	}); err != nil {
		return false, fmt.Errorf("record audit retention: %w", err)
	}
	return true, nil
}
