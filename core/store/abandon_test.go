package store_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestAbandonNodeReleasesWithoutCleanupAndRecordsIt: a node holding a
// running allocation (with a leftover snapshot cleanup still owes) and an
// allocation whose Create was never sent is abandoned only while it is
// retired, recorded on another backend than its binding, and named by its
// bound backend (ErrFenced, nothing written, otherwise). The abandonment
// ends both Environments failed (node_abandoned, devices revoked),
// releases both allocations without cleanup (abandoned), their
// placements too, removes the node and records exactly what it abandoned,
// which GetNodeAbandonment reads back. An allocation that was not
// abandoned still cannot be released without confirmed cleanup.
func TestAbandonNodeReleasesWithoutCleanupAndRecordsIt(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	owned := storetest.Owner(t, st)
	running, _ := storetest.RunningSession(t, owned)
	node := running.Allocation.NodeID
	pending := createSessionOn(t, owned) // placed on the only present node
	if pending.Allocation.NodeID != node {
		t.Fatalf("second Session placed on %s, want %s", pending.Allocation.NodeID, node)
	}
	if _, err := st.Pool().Exec(ctx, "INSERT INTO allocation_leftovers (allocation_id, kind, identity, provenance) VALUES ($1, 'snapshot', 'snap-1', 'p')",
		running.Allocation.ID); err != nil {
		t.Fatal(err)
	}
	const bound = "docker:a"
	if _, err := owned.BindNodeBackend(ctx, node, bound); err != nil {
		t.Fatal(err)
	}

	fenced := func(what, fp string) {
		t.Helper()
		if _, err := owned.AbandonNode(ctx, node, fp, store.NewAdminProvenance(uuid.New()), uuid.New()); !errdefs.IsFenced(err) {
			t.Fatalf("%s: %v, want fenced", what, err)
		}
		if holds, err := st.NodeHolds(ctx, node); err != nil || !holds {
			t.Fatalf("%s: the node no longer holds its allocations (%v)", what, err)
		}
	}
	fenced("an enabled node", bound)
	if _, err := owned.SetNodeState(ctx, node, store.NodeEnabled, store.NodeRetired, store.NewAdminProvenance(uuid.New()), uuid.New()); err != nil {
		t.Fatal(err)
	}
	fenced("a node recorded on its bound backend", bound)
	if err := owned.RecordNodePresence(ctx, store.NodePresence{
		NodeID: node, ConnectionID: uuid.New(), Generation: 1, DiagnosticCode: "backend_fingerprint_mismatch",
	}); err != nil {
		t.Fatal(err)
	}
	fenced("another backend named", "docker:b")

	// The decision's event is the transaction's last insert: refused, the
	// abandonment rolls back whole; the zero Provenance is refused.
	undo := refuseWrites(t, ctx, owned, "audit_events", "INSERT", "NEW.action = 'node.abandon'")
	if _, err := owned.AbandonNode(ctx, node, bound, store.NewAdminProvenance(uuid.New()), uuid.New()); err == nil {
		t.Fatal("abandon succeeded despite the injected failure")
	}
	undo()
	if _, err := owned.AbandonNode(ctx, node, bound, store.Provenance{}, uuid.New()); !errdefs.IsInvalid(err) {
		t.Fatalf("abandon without provenance: %v", err)
	}
	if n, err := st.GetNode(ctx, node); err != nil || n.State != store.NodeRetired {
		t.Fatalf("a failed abandonment left the node %+v, %v", n, err)
	}
	if holds, err := st.NodeHolds(ctx, node); err != nil || !holds {
		t.Fatalf("a failed abandonment released what the node holds (%v)", err)
	}
	if n := len(decisions(t, owned, "node.abandon")); n != 0 {
		t.Fatalf("failed abandonments recorded %d events", n)
	}

	req, eventID := uuid.New(), uuid.New()
	ab, err := owned.AbandonNode(ctx, node, bound, store.NewAdminProvenance(req), eventID)
	if err != nil {
		t.Fatal(err)
	}
	events := decisions(t, owned, "node.abandon")
	if len(events) != 1 || events[0].ID != eventID || events[0].RequestID != req || events[0].Actor() != "admin" ||
		events[0].Kind != store.AuditDecision || events[0].Resource != "nodes/"+node.String() ||
		events[0].Detail["allocations_released"] != float64(2) || events[0].Detail["reservations_released"] != float64(0) ||
		events[0].Detail["environments_failed"] != float64(2) {
		t.Fatalf("abandon events %+v", events)
	}
	if ab.NodeID != node || ab.Action != store.ActionRemoveNodeAbandon || ab.BackendFingerprint != bound || ab.AbandonedAt.IsZero() ||
		len(ab.Allocations) != 2 || len(ab.Reservations) != 0 || len(ab.Terminations) != 2 {
		t.Fatalf("abandonment %+v", ab)
	}
	byID := map[uuid.UUID]store.AbandonedAllocation{}
	for _, a := range ab.Allocations {
		byID[a.AllocationID] = a
	}
	if a := byID[running.Allocation.ID]; a.ProviderID != running.Allocation.ProviderID || a.SessionID != running.Session.ID ||
		len(a.Snapshots) != 1 || a.Snapshots[0].Identity != "snap-1" {
		t.Fatalf("the running allocation abandoned as %+v", a)
	}
	if a := byID[pending.Allocation.ID]; a.ProviderID != "" || a.SessionID != pending.Session.ID || len(a.Snapshots)+len(a.Computes) != 0 {
		t.Fatalf("the never-created allocation abandoned as %+v", a)
	}

	for _, b := range []store.SessionBundle{running, pending} {
		a, err := st.GetAllocation(ctx, b.Allocation.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.State != store.AllocationReleased || a.AbandonedAt == nil || a.DeviceRevokedAt == nil {
			t.Fatalf("abandoned allocation %+v", a)
		}
		got, err := st.GetSession(ctx, b.Session.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Environment.State != store.EnvironmentFailed || got.Environment.FailureCode != store.FailureNodeAbandoned ||
			got.Placement.State != store.PlacementReleased {
			t.Fatalf("Session of an abandoned allocation: %+v", got)
		}
	}
	if n, err := st.GetNode(ctx, node); err != nil || n.State != store.NodeRemoved {
		t.Fatalf("abandoned node %+v, %v", n, err)
	}
	if holds, err := st.NodeHolds(ctx, node); err != nil || holds {
		t.Fatalf("the abandoned node still holds something (%v)", err)
	}
	loads, err := st.NodeLoads(ctx, []uuid.UUID{node})
	if err != nil || loads[node].Active != 0 || loads[node].Retained != 0 {
		t.Fatalf("the abandoned node's load %+v, %v", loads, err)
	}

	read, err := st.GetNodeAbandonment(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	ab.Terminations = nil
	if !read.AbandonedAt.Equal(ab.AbandonedAt) || read.BackendFingerprint != bound || read.Action != ab.Action ||
		len(read.Allocations) != len(ab.Allocations) {
		t.Fatalf("read back %+v, want %+v", read, ab)
	}
	for i := range read.Allocations {
		w, g := ab.Allocations[i], read.Allocations[i]
		if g.AllocationID != w.AllocationID || g.SessionID != w.SessionID || g.ProviderID != w.ProviderID || len(g.Snapshots) != len(w.Snapshots) {
			t.Fatalf("read back allocation %d %+v, want %+v", i, g, w)
		}
	}
	if _, err := owned.AbandonNode(ctx, node, bound, store.NewAdminProvenance(uuid.New()), uuid.New()); !errdefs.IsFenced(err) {
		t.Fatalf("abandoning a removed node: %v", err)
	}
	if n := len(decisions(t, owned, "node.")); n != 3 { // the enablement, the retirement and the one abandonment
		t.Fatalf("node events after a refused repeat: %d", n)
	}

	// Only an abandonment releases without confirmed cleanup.
	other, _ := storetest.RunningSession(t, owned)
	if _, err := st.Pool().Exec(ctx, "UPDATE allocations SET state = 'released', released_at = now(), cleanup_requested_at = now() WHERE id = $1",
		other.Allocation.ID); err == nil {
		t.Fatal("an allocation was released without confirmed cleanup")
	}
}

// createSessionOn commits a Session on the only present node of owned's
// database, its Create never claimed.
func createSessionOn(t *testing.T, owned *storetest.Owned) store.SessionBundle {
	t.Helper()
	raw := make([]byte, 48)
	_, _ = rand.Read(raw)
	digest := sha256.Sum256(raw)
	b, err := owned.CreateSession(context.Background(), store.CreateSessionParams{
		RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "pending",
		SessionID: uuid.New(), EnvironmentID: uuid.New(), AllocationID: uuid.New(), DeviceID: uuid.New(),
		CredentialDigest: digest[:], CredentialCiphertext: raw, CredentialNonce: raw[:12],
		CreateReceipt: uuid.New(), Generation: 1, MaxActive: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
