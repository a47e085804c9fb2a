package audit_test

import (
	"testing"
	"time"

	"berth.dev/core/audit"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestRecordRetention: the first retention is recorded (Core's decision,
// retention_seconds), the same one again is not, a changed one is.
func TestRecordRetention(t *testing.T) {
	db, ctx := storetest.Parallel(t)
	for i, c := range []struct {
		retention time.Duration
		recorded  bool
	}{{audit.DefaultRetention, true}, {audit.DefaultRetention, false}, {48 * time.Hour, true}, {48 * time.Hour, false}} {
		got, err := audit.RecordRetention(ctx, db.Reader, db.Admin, c.retention)
		must(t, err)
		if got != c.recorded {
			t.Fatalf("step %d (%s): recorded %v, want %v", i, c.retention, got, c.recorded)
		}
	}
	far := time.Now().Add(time.Hour)
	events, err := db.ListAuditEvents(ctx, store.AuditFilter{ActionPrefix: "audit.retention", End: &far}, store.AuditCursor{}, 10)
	must(t, err)
	if len(events) != 2 || events[0].Detail["retention_seconds"] != float64(audit.DefaultRetention/time.Second) ||
		events[1].Detail["retention_seconds"] != float64(48*3600) || events[1].Actor() != "core" ||
		events[1].Detail["core_reason"] != "retention_configured" || events[1].Kind != store.AuditDecision {
		t.Fatalf("retention events %+v", events)
	}
}
