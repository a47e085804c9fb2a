package store_test

import (
	"testing"
	"time"

	"berth.dev/core/store"
)

// TestAuditTailDoesNotSkipALateCommit: an event whose transaction stays
// open for 3 s is stamped (clock_timestamp) before events that commit
// meanwhile. A reader tailing the trail by keyset up to now() would step
// past it before it commits and never list it; the default end, now() -
// 5 s, lists it once it commits.
func TestAuditTailDoesNotSkipALateCommit(t *testing.T) {
	st, ctx := newStore(t)
	p := store.NewAdminProvenance(newUUID(t))
	late := newUUID(t)
	tx, err := st.Pool().Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO audit_events (id, kind, actor_kind, action, resource, request_id, outcome)
		VALUES ($1, 'call', 'admin', 'call.late', '', $2, 'ok')`, late, newUUID(t))
	must(t, err)

	type tail struct {
		after store.AuditCursor
		seen  bool
	}
	var now, safe tail
	read := func(tl *tail, end *time.Time) {
		t.Helper()
		for {
			page, err := st.ListAuditEvents(ctx, store.AuditFilter{End: end}, tl.after, 100)
			must(t, err)
			for _, e := range page {
				tl.seen = tl.seen || e.ID == late
			}
			if len(page) == 0 {
				return
			}
			last := page[len(page)-1]
			tl.after = store.AuditCursor{OccurredAt: last.OccurredAt, ID: last.ID}
		}
	}
	start := time.Now()
	committed := false
	for time.Since(start) < 9*time.Second {
		if time.Since(start) < 3*time.Second {
			must(t, st.RecordAuditEvent(ctx, p, callEntry(t, "call.meanwhile", "", "ok")))
		} else if !committed {
			must(t, tx.Commit(ctx))
			committed = true
		}
		end := time.Now().Add(time.Hour) // "up to now", and past it
		read(&now, &end)
		read(&safe, nil)
		time.Sleep(100 * time.Millisecond)
	}
	if now.seen {
		t.Fatal("the reader up to now listed the late event: the test does not show the hazard")
	}
	if !safe.seen {
		t.Fatal("the reader with the default end (now - 5 s) skipped an event that committed 3 s late")
	}
}
