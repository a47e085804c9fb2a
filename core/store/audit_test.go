package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

// far is an end_time past every event a test records, so a listing does
// not wait out the default end (now() - 5 s).
var far = time.Now().Add(time.Hour)

func callEntry(t testing.TB, action, resource, outcome string) store.AuditEntry {
	return store.AuditEntry{ID: newUUID(t), Kind: store.AuditCall, Action: action, Resource: resource, Outcome: outcome}
}

// listAll reads every event of f in pages of size.
func listAll(t testing.TB, ctx context.Context, st *storetest.Store, f store.AuditFilter, size int) []store.AuditEvent {
	t.Helper()
	events, _ := storetest.Pages(t, size, func(after store.AuditCursor) ([]store.AuditEvent, error) {
		return st.ListAuditEvents(ctx, f, after, size)
	}, func(e store.AuditEvent) store.AuditCursor {
		return store.AuditCursor{OccurredAt: e.OccurredAt, ID: e.ID}
	})
	return events
}

// TestAuditEventRoundTrip: an event records its provenance (the
// administrator, a key by id with its project, Core with its reason), the
// database clock and what it was given; the zero Provenance and malformed
// entries are refused.
func TestAuditEventRoundTrip(t *testing.T) {
	st, ctx := newStore(t)
	req, key, tenant, project := newUUID(t), newUUID(t), newUUID(t), newUUID(t)
	admin := callEntry(t, "call.project_service.create_tenant", "tenants/"+tenant.String(), "ok")
	must(t, st.RecordAuditEvent(ctx, store.NewAdminProvenance(req), admin))
	keyed := callEntry(t, "call.session_service.delete_session", "", "project_key_method_denied")
	must(t, st.RecordAuditEvent(ctx, store.NewKeyProvenance(key, tenant, project, req), keyed))
	parent := newUUID(t)
	decided := store.AuditEntry{ID: newUUID(t), Kind: store.AuditDecision, Action: "owner.stop", Outcome: "ok",
		Detail: map[string]any{"generation": 3}}
	must(t, st.RecordAuditEvent(ctx, store.NewCoreProvenance("owner_failure", req).WithParent(parent), decided))

	got := listAll(t, ctx, st, store.AuditFilter{End: &far}, 10)
	if len(got) != 3 {
		t.Fatalf("listed %d events, want 3", len(got))
	}
	if e := got[0]; e.Actor() != "admin" || e.RequestID != req || e.Resource != admin.Resource || e.ProjectID != nil || e.OccurredAt.IsZero() {
		t.Fatalf("admin event %+v", e)
	}
	if e := got[1]; e.Actor() != "key:"+key.String() || *e.ProjectID != project || *e.TenantID != tenant || e.Outcome != "project_key_method_denied" {
		t.Fatalf("key event %+v", e)
	}
	if e := got[2]; e.Actor() != "core" || *e.ParentID != parent || e.Detail["core_reason"] != "owner_failure" || e.Detail["generation"] != float64(3) {
		t.Fatalf("core event %+v", e)
	}

	for name, c := range map[string]struct {
		p store.Provenance
		e store.AuditEntry
	}{
		"zero provenance":    {store.Provenance{}, callEntry(t, "call.x", "", "ok")},
		"nil request":        {store.NewAdminProvenance(uuid.Nil), callEntry(t, "call.x", "", "ok")},
		"core without a why": {store.NewCoreProvenance("", req), callEntry(t, "call.x", "", "ok")},
		"upper-case action":  {store.NewAdminProvenance(req), callEntry(t, "call.X", "", "ok")},
		"outcome":            {store.NewAdminProvenance(req), callEntry(t, "call.x", "", "Not OK")},
		"control resource":   {store.NewAdminProvenance(req), callEntry(t, "call.x", "a\nb", "ok")},
		"kind":               {store.NewAdminProvenance(req), store.AuditEntry{ID: newUUID(t), Kind: "other", Action: "a", Outcome: "ok"}},
	} {
		if err := st.RecordAuditEvent(ctx, c.p, c.e); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}

// TestRecordAuditCommitsWithItsTransaction: the helper the deciding
// writes call records in their transaction: it commits with it and rolls
// back with it.
func TestRecordAuditCommitsWithItsTransaction(t *testing.T) {
	st, ctx := newStore(t)
	p := store.NewCoreProvenance("test", newUUID(t))
	kept := store.AuditEntry{ID: newUUID(t), Kind: store.AuditDecision, Action: "test.kept", Outcome: "ok"}
	must(t, store.RecordAuditInTx(ctx, st.Store, p, kept, nil))
	boom := errors.New("the decision failed after its event")
	lost := store.AuditEntry{ID: newUUID(t), Kind: store.AuditDecision, Action: "test.lost", Outcome: "ok"}
	if err := store.RecordAuditInTx(ctx, st.Store, p, lost, boom); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the injected one", err)
	}
	got := listAll(t, ctx, st, store.AuditFilter{End: &far}, 10)
	if len(got) != 1 || got[0].ID != kept.ID {
		t.Fatalf("listed %+v, want only the committed event", got)
	}
	if err := store.RecordAuditInTx(ctx, st.Store, store.Provenance{}, kept, nil); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("zero provenance in a transaction: %v", err)
	}
}

// TestListAuditEventsFiltersAndPages: each filter narrows by its column;
// keyset pages read every event recorded before the listing exactly once
// and in order while others are recorded concurrently; the default end is
// five seconds before the database's now.
func TestListAuditEventsFiltersAndPages(t *testing.T) {
	st, ctx := newStore(t)
	req, key, tenant, project := newUUID(t), newUUID(t), newUUID(t), newUUID(t)
	adminP := store.NewAdminProvenance(req)
	keyP := store.NewKeyProvenance(key, tenant, project, req)
	var before []uuid.UUID
	for i := range 30 {
		p, e := adminP, callEntry(t, "call.session_service.create_session", "sessions/"+newUUID(t).String(), "ok")
		if i%3 == 0 {
			p, e = keyP, callEntry(t, "call.turn_service.submit_turn", "sessions/x", "not_found")
		}
		must(t, st.RecordAuditEvent(ctx, p, e))
		before = append(before, e.ID)
	}
	start := time.Now().Add(-time.Hour)
	count := func(f store.AuditFilter) int {
		f.End = &far
		return len(listAll(t, ctx, st, f, 4))
	}
	for name, c := range map[string]struct {
		f    store.AuditFilter
		want int
	}{
		"none":          {store.AuditFilter{}, 30},
		"start":         {store.AuditFilter{Start: &start}, 30},
		"admin":         {store.AuditFilter{ActorKind: store.ActorAdmin}, 20},
		"key":           {store.AuditFilter{ActorKind: store.ActorProjectKey, ActorKeyID: &key}, 10},
		"other key":     {store.AuditFilter{ActorKeyID: &tenant}, 0},
		"project":       {store.AuditFilter{ProjectID: &project}, 10},
		"action prefix": {store.AuditFilter{ActionPrefix: "call.session_"}, 20},
		"resource":      {store.AuditFilter{Resource: "sessions/x"}, 10},
		"outcome":       {store.AuditFilter{Outcome: "not_found"}, 10},
		"both":          {store.AuditFilter{Outcome: "ok", ProjectID: &project}, 0},
		"ended":         {store.AuditFilter{Start: &far}, 0},
	} {
		if got := count(c.f); got != c.want {
			t.Errorf("%s: listed %d, want %d", name, got, c.want)
		}
	}
	if got := listAll(t, ctx, st, store.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("the default end (now - 5 s) listed %d events recorded just now", len(got))
	}

	// Pages under concurrent inserts: each page is read while more events
	// are recorded; none is skipped or repeated.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := st.RecordAuditEvent(ctx, adminP, callEntry(t, "other.concurrent", "", "ok")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var listed []store.AuditEvent
	after := store.AuditCursor{}
	for {
		page, err := st.ListAuditEvents(ctx, store.AuditFilter{ActionPrefix: "call.", End: &far}, after, 3)
		must(t, err)
		listed = append(listed, page...)
		if len(page) < 3 {
			break
		}
		after = store.AuditCursor{OccurredAt: page[2].OccurredAt, ID: page[2].ID}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	var ids []uuid.UUID
	for i, e := range listed {
		ids = append(ids, e.ID)
		if i > 0 && (e.OccurredAt.Before(listed[i-1].OccurredAt) ||
			e.OccurredAt.Equal(listed[i-1].OccurredAt) && e.ID.String() <= listed[i-1].ID.String()) {
			t.Fatalf("page order broken at %d", i)
		}
	}
	if !slices.Equal(ids, before) {
		t.Fatalf("paged %d events under concurrent inserts, want the %d recorded before, in order", len(ids), len(before))
	}
}

// TestExpireAuditEvents: the sweep deletes events older than the
// retention on the database clock (occurred_at backdated in SQL), in
// batches of at most AuditSweepBatch, and keeps younger ones; it is the
// owner's and refuses a retention under a second.
func TestExpireAuditEvents(t *testing.T) {
	st, ctx := newStore(t)
	owned := storetest.Owner(t, st)
	p := store.NewAdminProvenance(newUUID(t))
	for range store.AuditSweepBatch + 5 {
		must(t, st.RecordAuditEvent(ctx, p, callEntry(t, "call.old", "", "ok")))
	}
	young := callEntry(t, "call.young", "", "ok")
	must(t, st.RecordAuditEvent(ctx, p, young))
	_, err := st.Pool().Exec(ctx, `UPDATE audit_events SET occurred_at = now() - interval '25 hours' WHERE action = 'call.old'`)
	must(t, err)
	_, err = st.Pool().Exec(ctx, `UPDATE audit_events SET occurred_at = now() - interval '23 hours' WHERE action = 'call.young'`)
	must(t, err)

	n, err := owned.ExpireAuditEvents(ctx, 24*time.Hour)
	must(t, err)
	if n != store.AuditSweepBatch {
		t.Fatalf("first batch deleted %d, want %d", n, store.AuditSweepBatch)
	}
	n, err = owned.ExpireAuditEvents(ctx, 24*time.Hour)
	must(t, err)
	if n != 5 {
		t.Fatalf("second batch deleted %d, want 5", n)
	}
	got := listAll(t, ctx, st, store.AuditFilter{End: &far}, 100)
	if len(got) != 1 || got[0].ID != young.ID {
		t.Fatalf("left %d events, want only the young one", len(got))
	}
	if _, err := owned.ExpireAuditEvents(ctx, 0); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("retention 0: %v", err)
	}
	if _, err := st.AsOwner(owned.Epoch()+1).ExpireAuditEvents(ctx, 24*time.Hour); !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("a superseded owner swept: %v", err)
	}
}
