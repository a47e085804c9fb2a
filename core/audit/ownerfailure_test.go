package audit_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/audit"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestOwnerFailureIsCoresDecision: Writer.OwnerFailure returns at once and
// records owner.failure as Core's own decision (actor core, core_reason
// owner_failure) with the drain's cause and the late workers' nodes.
func TestOwnerFailureIsCoresDecision(t *testing.T) {
	db, ctx := storetest.Parallel(t)
	w := audit.NewWriter(db.Admin, slog.New(slog.NewTextHandler(io.Discard, nil)))
	late := []uuid.UUID{uuid.New(), uuid.New()}
	w.OwnerFailure("retirement", late)
	far := time.Now().Add(time.Hour)
	var events []store.AuditEvent
	for deadline := time.Now().Add(10 * time.Second); len(events) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		events, err = db.ListAuditEvents(ctx, store.AuditFilter{ActionPrefix: "owner.failure", End: &far}, store.AuditCursor{}, 10)
		must(t, err)
	}
	if len(events) != 1 {
		t.Fatalf("owner failure events %+v", events)
	}
	e := events[0]
	nodes, _ := e.Detail["nodes"].([]any)
	if e.Kind != store.AuditDecision || e.Actor() != "core" || e.Detail["core_reason"] != "owner_failure" || e.Detail["cause"] != "retirement" ||
		e.Detail["late_workers"] != float64(2) || len(nodes) != 2 || nodes[0] != "nodes/"+late[0].String() || e.Outcome != "ok" {
		t.Fatalf("owner failure event %+v", e)
	}
	if w.Failures() != 0 {
		t.Fatalf("%d failures", w.Failures())
	}
}
