package store_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// presenceFixture claims the installation, issues two owner epochs, the
// second holding the execution lease, and creates a node: where the
// presence and backend binding tests start.
func presenceFixture(t *testing.T) (st *storetest.Store, ctx context.Context, stale, leased uint64, nodeID uuid.UUID) {
	t.Helper()
	st = storetest.New(t)
	ctx = context.Background()
	epochs := claim(t, ctx, st, 2)
	wantLease(t, ctx, st, uuid.New(), epochs[1], time.Hour, true, "lease")
	nodeID = uuid.New()
	key := sha256.Sum256([]byte(nodeID.String()))
	if _, err := st.CreateNode(ctx, nodeID, "n1.test:7443", []byte("der"), "sha256:"+fmtHex(key[:]), key[:]); err != nil {
		t.Fatal(err)
	}
	return st, ctx, epochs[0], epochs[1], nodeID
}

func TestNodePresenceIsFencedAndAgesByTheDatabaseClock(t *testing.T) {
	st, ctx, epoch1, epoch2, nodeID := presenceFixture(t)
	if _, err := st.GetNodePresence(ctx, nodeID); !errdefs.IsNotFound(err) {
		t.Fatalf("before any report: %v", err)
	}
	// record reports p as the Core of p's owner epoch.
	record := func(p store.NodePresence) error { return st.AsOwner(p.OwnerEpoch).RecordNodePresence(ctx, p) }
	report := store.NodePresence{NodeID: nodeID, ConnectionID: uuid.New(), OwnerEpoch: epoch2, Generation: 1, Ready: true}
	if err := record(report); err != nil {
		t.Fatal(err)
	}
	p, err := st.GetNodePresence(ctx, nodeID)
	if err != nil || !p.Present || p.OwnerEpoch != epoch2 || !p.Ready {
		t.Fatalf("fresh report: %+v, %v", p, err)
	}
	// An older owner cannot overwrite the newer owner's record.
	stale := report
	stale.OwnerEpoch, stale.ConnectionID, stale.Ready, stale.DiagnosticCode = epoch1, uuid.New(), false, "image_missing"
	if err := record(stale); !errdefs.IsFenced(err) {
		t.Fatalf("stale owner: %v", err)
	}
	if p, _ := st.GetNodePresence(ctx, nodeID); p.ConnectionID != report.ConnectionID || !p.Ready {
		t.Fatalf("stale owner changed the record: %+v", p)
	}
	// A report older than 45 s by the database clock does not count.
	if _, err := st.Pool().Exec(ctx, "UPDATE node_presence SET reported_at = now() - interval '46 seconds'"); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.GetNodePresence(ctx, nodeID); p.Present {
		t.Fatalf("a 46-second-old report counts as present: %+v", p)
	}
	// A fresh report whose connection ended does not count.
	if err := record(report); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.GetNodePresence(ctx, nodeID); !p.Present || !p.Connected {
		t.Fatalf("fresh report again: %+v", p)
	}
	// Another connection's end leaves the record alone.
	if err := st.AsOwner(epoch2).MarkNodeDisconnected(ctx, nodeID, uuid.New()); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.GetNodePresence(ctx, nodeID); !p.Present {
		t.Fatalf("another connection's end changed the record: %+v", p)
	}
	if err := st.AsOwner(epoch2).MarkNodeDisconnected(ctx, nodeID, report.ConnectionID); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.GetNodePresence(ctx, nodeID); p.Present || p.Connected {
		t.Fatalf("a disconnected record counts as present: %+v", p)
	}
	// A new epoch issued by a standby that waits for the lease does not
	// supersede the lease holder's records...
	if err := record(report); err != nil {
		t.Fatal(err)
	}
	epoch3, err := st.NextOwnerEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := st.GetNodePresence(ctx, nodeID); !p.Present {
		t.Fatalf("a waiting standby's epoch superseded the holder's presence: %+v", p)
	}
	// ...but once the lease has lapsed or another epoch holds it, a fresh
	// report of the old epoch does not count.
	if _, err := st.Pool().Exec(ctx, "UPDATE execution_lease SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.GetNodePresence(ctx, nodeID); p.Present {
		t.Fatalf("presence counts while no lease is held: %+v", p)
	}
	wantLease(t, ctx, st, uuid.New(), epoch3, time.Hour, true, "takeover")
	if p, _ := st.GetNodePresence(ctx, nodeID); p.Present || p.OwnerEpoch != epoch2 {
		t.Fatalf("presence under a superseded owner epoch counts: %+v", p)
	}
}

// TestNodePresenceAgesWithTheReport: a report is recorded with its age
// (the time since it arrived), not as new: recorded again without a newer
// report it keeps ageing, and one that arrived 46 s ago does not count,
// however recently it was recorded. GetNodePresence and NodePresences
// apply the one predicate (node_present); a negative age is refused.
func TestNodePresenceAgesWithTheReport(t *testing.T) {
	st, ctx, _, epoch, nodeID := presenceFixture(t)
	owned := st.AsOwner(epoch)
	report := store.NodePresence{NodeID: nodeID, ConnectionID: uuid.New(), Generation: 1, Ready: true, ReportAge: 46 * time.Second}
	if err := owned.RecordNodePresence(ctx, report); err != nil {
		t.Fatal(err)
	}
	p, err := st.GetNodePresence(ctx, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Present || !p.Connected {
		t.Fatalf("a report that arrived 46 s ago, just recorded: %+v", p)
	}
	var micros float64
	if err := st.Pool().QueryRow(ctx, "SELECT extract(epoch FROM now() - reported_at) * 1e6 FROM node_presence WHERE node_id = $1", nodeID).Scan(&micros); err != nil {
		t.Fatal(err)
	}
	if age := time.Duration(micros) * time.Microsecond; age < 46*time.Second {
		t.Fatalf("reported_at is %v before the database's now, want at least the report's age", age)
	}
	all, err := st.NodePresences(ctx, []uuid.UUID{nodeID, uuid.New()})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[nodeID].Present || all[nodeID].ReportedAt != p.ReportedAt {
		t.Fatalf("NodePresences %+v, want the one record, absent like GetNodePresence's %+v", all, p)
	}
	report.ReportAge = 10 * time.Second
	if err := owned.RecordNodePresence(ctx, report); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.GetNodePresence(ctx, nodeID); !p.Present {
		t.Fatalf("a report that arrived 10 s ago: %+v", p)
	}
	if all, _ := st.NodePresences(ctx, []uuid.UUID{nodeID}); !all[nodeID].Present {
		t.Fatalf("NodePresences disagrees with GetNodePresence: %+v", all)
	}
	report.ReportAge = -time.Second
	if err := owned.RecordNodePresence(ctx, report); !errdefs.IsInvalid(err) {
		t.Fatalf("a negative report age: %v", err)
	}
}

func fmtHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// TestNodeBackendBindsOnce: the first fingerprint bound stays the node's;
// a later, different one is not written and the bound one comes back; only
// the owner holding the execution lease binds.
func TestNodeBackendBindsOnce(t *testing.T) {
	st, ctx, stale, epoch, nodeID := presenceFixture(t)
	owner := st.AsOwner(epoch)
	if _, err := st.AsOwner(stale).BindNodeBackend(ctx, nodeID, "docker:other"); !errdefs.IsFenced(err) {
		t.Fatalf("an owner without the lease binds: %v", err)
	}
	for _, fp := range []string{"docker:engine-a", "docker:engine-a", "docker:engine-b"} {
		bound, err := owner.BindNodeBackend(ctx, nodeID, fp)
		if err != nil || bound != "docker:engine-a" {
			t.Fatalf("bind %q: bound %q, %v", fp, bound, err)
		}
	}
	if _, err := owner.BindNodeBackend(ctx, nodeID, ""); !errdefs.IsInvalid(err) {
		t.Fatalf("empty fingerprint: %v", err)
	}
	if _, err := owner.BindNodeBackend(ctx, uuid.New(), "docker:engine-a"); err == nil {
		t.Fatal("bound a node that does not exist")
	}
}
