package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// decisions returns the decision events whose action starts with prefix,
// in order (End in the future: the default end is now - 5 s).
func decisions(t *testing.T, st *storetest.Owned, prefix string) []store.AuditEvent {
	t.Helper()
	events, err := st.ListAuditEvents(t.Context(), store.AuditFilter{ActionPrefix: prefix, End: ptr(time.Now().Add(time.Hour))}, store.AuditCursor{}, 100)
	must(t, err)
	return events
}

// refuseWrites installs a trigger that fails every write of kind op
// (INSERT, UPDATE, DELETE) to table when cond (on NEW or OLD) holds, and
// returns its removal.
func refuseWrites(t *testing.T, ctx context.Context, st *storetest.Owned, table, op, cond string) func() {
	t.Helper()
	name := "refuse_" + table
	_, err := st.Pool().Exec(ctx, fmt.Sprintf(`
CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'injected' USING ERRCODE = 'check_violation', CONSTRAINT = 'injected';
END;
$$;
CREATE TRIGGER %[1]s BEFORE %[3]s ON %[2]s FOR EACH ROW
    WHEN (%[4]s) EXECUTE FUNCTION %[1]s();`, name, table, op, cond))
	must(t, err)
	return func() {
		t.Helper()
		_, err := st.Pool().Exec(ctx, fmt.Sprintf(`DROP TRIGGER %[1]s ON %[2]s; DROP FUNCTION %[1]s();`, name, table))
		must(t, err)
	}
}

// TestProviderSwitchRecordsItsDecision: a change of the switch records
// provider.disable / provider.enable (who, request, resource) in its own
// transaction; a repeat records nothing; a failure after the event's
// insert rolls both back; the zero Provenance is refused.
func TestProviderSwitchRecordsItsDecision(t *testing.T) {
	st, ctx := ownedStore(t)
	if _, err := st.SetProviderDisabled(ctx, true, store.Provenance{}, uuid.New()); err == nil {
		t.Fatal("disable without provenance succeeded")
	}
	// The event is inserted last: refuse it, and the switch stays.
	undo := refuseWrites(t, ctx, st, "audit_events", "INSERT", "NEW.action = 'provider.disable'")
	if _, err := st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New()); err == nil {
		t.Fatal("disable succeeded despite the injected failure")
	}
	undo()
	if sw, err := st.GetProviderSwitch(ctx); err != nil || sw.Disabled {
		t.Fatalf("a failed disable left %+v, %v", sw, err)
	}
	if n := len(decisions(t, st, "provider.")); n != 0 {
		t.Fatalf("refused switches recorded %d events", n)
	}

	req, eventID := uuid.New(), uuid.New()
	_, err := st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(req), eventID)
	must(t, err)
	_, err = st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	events := decisions(t, st, "provider.")
	if len(events) != 1 || events[0].ID != eventID || events[0].Action != "provider.disable" || events[0].Kind != store.AuditDecision ||
		events[0].Actor() != "admin" || events[0].RequestID != req || events[0].Resource != "deployment" || events[0].Outcome != "ok" {
		t.Fatalf("events after disable %+v", events)
	}
	_, err = st.SetProviderDisabled(ctx, false, store.NewCoreProvenance("test", uuid.New()), uuid.New())
	must(t, err)
	_, err = st.SetProviderDisabled(ctx, false, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	events = decisions(t, st, "provider.")
	if len(events) != 2 || events[1].Action != "provider.enable" || events[1].Actor() != "core" || events[1].Detail["core_reason"] != "test" {
		t.Fatalf("events after enable %+v", events)
	}
}
