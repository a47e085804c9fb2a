package store_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestPlacementReadsDurablePresence: placement chooses only nodes whose
// durable presence record counts (connected, ready for the generation,
// younger than 45 s by the database clock, recorded under the owner epoch
// that holds the execution lease); nothing in memory takes part.
func TestPlacementReadsDurablePresence(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 2)
	old, cur := epochs[0], epochs[1]
	wantLease(t, ctx, st, newUUID(t), cur, time.Hour, true, "lease")
	owned := st.AsOwner(cur)

	report := func(node uuid.UUID, epoch, generation uint64, ready bool) {
		t.Helper()
		must(t, st.AsOwner(epoch).RecordNodePresence(ctx, store.NodePresence{
			NodeID: node, ConnectionID: newUUID(t), Generation: generation, Ready: ready,
			CPUMillis: storetest.Ample, MemoryBytes: storetest.Ample, DiskFreeBytes: storetest.Ample,
		}))
	}
	// reported is a new enabled node with one report.
	reported := func(epoch, generation uint64, ready bool) uuid.UUID {
		t.Helper()
		node := enabledNode(t, ctx, st)
		report(node, epoch, generation, ready)
		return node
	}
	fresh := reported(cur, 1, true)
	stale := reported(cur, 1, true)
	otherEpoch := reported(old, 1, true)
	notReady := reported(cur, 1, false)
	otherGeneration := reported(cur, 2, true)
	disconnected := reported(cur, 1, true)
	storetest.Absent(t, st, disconnected)
	enabledNode(t, ctx, st) // never reported
	// 46 seconds old by the database clock.
	if _, err := st.Pool().Exec(ctx, "UPDATE node_presence SET reported_at = now() - interval '46 seconds' WHERE node_id = $1", stale); err != nil {
		t.Fatal(err)
	}
	// A record 44 seconds old still counts.
	if _, err := st.Pool().Exec(ctx, "UPDATE node_presence SET reported_at = now() - interval '44 seconds' WHERE node_id = $1", fresh); err != nil {
		t.Fatal(err)
	}

	// Every placement goes to the one node that counts, although the
	// others are enabled, hold less and have room.
	for i := range 4 {
		b, err := owned.CreateSession(ctx, sessionParams(t, newUUID(t), 10))
		must(t, err)
		if b.Placement.NodeID != fresh {
			t.Fatalf("placement %d chose %s, want only %s", i, b.Placement.NodeID, fresh)
		}
	}
	// Presence and readiness are separate facts: the not-ready node and
	// the node of another generation are present, just not eligible.
	for n, want := range map[uuid.UUID]bool{
		fresh: true, notReady: true, otherGeneration: true,
		stale: false, otherEpoch: false, disconnected: false,
	} {
		p, err := st.GetNodePresence(ctx, n)
		must(t, err)
		if p.Present != want {
			t.Errorf("node %s present = %v, want %v: %+v", n, p.Present, want, p)
		}
	}

	// Once the fresh node's record ages past 45 s, nothing is placed.
	if _, err := st.Pool().Exec(ctx, "UPDATE node_presence SET reported_at = now() - interval '46 seconds' WHERE node_id = $1", fresh); err != nil {
		t.Fatal(err)
	}
	_, err := owned.CreateSession(ctx, sessionParams(t, newUUID(t), 10))
	wantClass(t, err, store.ErrNoCapacity)

	// A fresh report of the stale node brings it back.
	report(stale, cur, 1, true)
	b, err := owned.CreateSession(ctx, sessionParams(t, newUUID(t), 10))
	must(t, err)
	if b.Placement.NodeID != stale {
		t.Fatalf("after a fresh report placed on %s, want %s", b.Placement.NodeID, stale)
	}
}
