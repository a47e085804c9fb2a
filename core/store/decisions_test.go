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

// TestNodeStateRecordsItsDecision: each move records node.enable,
// node.retire or node.remove (who, request, node, the state it left) in
// the move's transaction; a move the node already made (from == to), a
// lost compare-and-swap and a move whose transaction fails record
// nothing; the zero Provenance is refused.
func TestNodeStateRecordsItsDecision(t *testing.T) {
	st, ctx := newOwned(t)
	n := createNode(t, ctx, st, newUUID(t))
	admin := func() store.Provenance { return store.NewAdminProvenance(uuid.New()) }
	if _, err := st.SetNodeState(ctx, n.ID, store.NodeEnrolled, store.NodeEnabled, store.Provenance{}, uuid.New()); err == nil {
		t.Fatal("a move without provenance succeeded")
	}
	undo := refuseWrites(t, ctx, st, "audit_events", "INSERT", "NEW.action = 'node.enable'")
	if _, err := st.SetNodeState(ctx, n.ID, store.NodeEnrolled, store.NodeEnabled, admin(), uuid.New()); err == nil {
		t.Fatal("enable succeeded despite the injected failure")
	}
	undo()
	if got, err := st.GetNode(ctx, n.ID); err != nil || got.State != store.NodeEnrolled {
		t.Fatalf("a failed enable left %+v, %v", got, err)
	}

	req, eventID := uuid.New(), uuid.New()
	_, err := st.SetNodeState(ctx, n.ID, store.NodeEnrolled, store.NodeEnabled, store.NewAdminProvenance(req), eventID)
	must(t, err)
	_, err = st.SetNodeState(ctx, n.ID, store.NodeEnrolled, store.NodeRetired, admin(), uuid.New()) // stale: fenced
	if err == nil {
		t.Fatal("a stale move succeeded")
	}
	_, err = st.SetNodeState(ctx, n.ID, store.NodeEnabled, store.NodeEnabled, admin(), uuid.New()) // no change
	must(t, err)
	_, err = st.SetNodeState(ctx, n.ID, store.NodeEnabled, store.NodeRetired, store.NewCoreProvenance("owner_failure", uuid.New()), uuid.New())
	must(t, err)
	_, err = st.SetNodeState(ctx, n.ID, store.NodeRetired, store.NodeRemoved, admin(), uuid.New())
	must(t, err)
	events := decisions(t, st, "node.")
	if len(events) != 3 {
		t.Fatalf("node events %+v", events)
	}
	for i, want := range []struct{ action, from, actor string }{
		{"node.enable", "enrolled", "admin"}, {"node.retire", "enabled", "core"}, {"node.remove", "retired", "admin"},
	} {
		e := events[i]
		if e.Action != want.action || e.Detail["from_state"] != want.from || e.Actor() != want.actor ||
			e.Kind != store.AuditDecision || e.Resource != "nodes/"+n.ID.String() || e.Outcome != "ok" {
			t.Fatalf("event %d: %+v, want %+v", i, e, want)
		}
	}
	if events[0].ID != eventID || events[0].RequestID != req {
		t.Fatalf("enable event %+v", events[0])
	}
}
