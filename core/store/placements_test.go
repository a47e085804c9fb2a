package store_test

import (
	"context"
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
	owned := storetest.As(st, cur)

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
		node := enabledNode(t, ctx, owned)
		report(node, epoch, generation, ready)
		return node
	}
	fresh := reported(cur, 1, true)
	stale := reported(cur, 1, true)
	otherEpoch := reported(old, 1, true)
	notReady := reported(cur, 1, false)
	otherGeneration := reported(cur, 2, true)
	disconnected := reported(cur, 1, true)
	storetest.Absent(t, owned, disconnected)
	enabledNode(t, ctx, owned) // never reported
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
		b, err := owned.CreateSession(ctx, sessionParams(t, 10))
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
	_, err := owned.CreateSession(ctx, sessionParams(t, 10))
	wantClass(t, err, store.ErrNoCapacity)

	// A fresh report of the stale node brings it back.
	report(stale, cur, 1, true)
	b, err := owned.CreateSession(ctx, sessionParams(t, 10))
	must(t, err)
	if b.Placement.NodeID != stale {
		t.Fatalf("after a fresh report placed on %s, want %s", b.Placement.NodeID, stale)
	}
}

// wantNodeLoadExact checks that node_load and node_holdings (migration
// 0013, kept by triggers) equal what they summarize: for every node, the
// Environments with an unreleased placement or an unreleased allocation on
// it, and their count (CountNodeHeld, the count placement used to make).
func wantNodeLoadExact(t *testing.T, ctx context.Context, st *storetest.Store) {
	t.Helper()
	var diff int
	err := st.Pool().QueryRow(ctx, `
		SELECT count(*) FROM (
			(SELECT node_id, environment_id FROM node_holdings
			 EXCEPT
			 (SELECT node_id, environment_id FROM placements WHERE state <> 'released'
			  UNION SELECT node_id, environment_id FROM allocations WHERE state <> 'released'))
			UNION ALL
			((SELECT node_id, environment_id FROM placements WHERE state <> 'released'
			  UNION SELECT node_id, environment_id FROM allocations WHERE state <> 'released')
			 EXCEPT
			 SELECT node_id, environment_id FROM node_holdings)
		) d`).Scan(&diff)
	must(t, err)
	if diff != 0 {
		t.Errorf("node_holdings differs from the held placements and allocations in %d rows", diff)
	}
	rows, err := st.Pool().Query(ctx, `SELECT node_id, held FROM node_load`)
	must(t, err)
	loads := map[uuid.UUID]int64{}
	for rows.Next() {
		var n uuid.UUID
		var held int64
		must(t, rows.Scan(&n, &held))
		loads[n] = held
	}
	must(t, rows.Err())
	for n, held := range loads {
		want, err := st.NodeHeld(ctx, n)
		must(t, err)
		if held != want {
			t.Errorf("node_load of %s = %d, want %d (CountNodeHeld)", n, held, want)
		}
	}
}

// TestNodeLoadFollowsPlacements: placements count in node_load as they
// are made, and placement spreads them by that count.
func TestNodeLoadFollowsPlacements(t *testing.T) {
	owned, ctx := ownedStore(t)
	a, b := presentNode(t, ctx, owned), presentNode(t, ctx, owned)
	count := map[uuid.UUID]int{}
	for range 6 {
		bundle, err := owned.CreateSession(ctx, sessionParams(t, 10))
		must(t, err)
		count[bundle.Placement.NodeID]++
	}
	if count[a] != 3 || count[b] != 3 {
		t.Errorf("placements %v, want 3 on each node", count)
	}
	wantNodeLoadExact(t, ctx, owned.Store)
}

// TestNodeLoadConcurrentReleases: one transaction releases an
// Environment's placement while another releases its allocation. Each
// sync runs under the node's load row lock and re-reads after the other
// committed, so the node stops counting the Environment; without the lock
// each would still see the other's row unreleased and keep it for ever.
func TestNodeLoadConcurrentReleases(t *testing.T) {
	owned, ctx := ownedStore(t)
	node := presentNode(t, ctx, owned)
	bundle, err := owned.CreateSession(ctx, sessionParams(t, 10))
	must(t, err)
	env := bundle.Environment.ID
	pool := owned.Pool()
	t1, err := pool.Begin(ctx)
	must(t, err)
	defer func() { _ = t1.Rollback(ctx) }()
	t2, err := pool.Begin(ctx)
	must(t, err)
	defer func() { _ = t2.Rollback(ctx) }()
	_, err = t1.Exec(ctx, `UPDATE placements SET state = 'released', released_at = now() WHERE environment_id = $1`, env)
	must(t, err)
	var pid2 int
	must(t, t2.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid2))
	second := make(chan error, 1)
	go func() {
		_, err := t2.Exec(ctx, `UPDATE allocations SET state = 'released', cleanup_requested_at = now(), cleanup_confirmed_at = now(), released_at = now() WHERE environment_id = $1`, env)
		second <- err
	}()
	// The second release runs before the first commits: it has finished
	// (it did not wait) or it waits on a lock (the node's load row).
	var done bool
	for !done {
		select {
		case err := <-second:
			must(t, err)
			done = true
			second <- nil
		default:
			var wait *string
			must(t, pool.QueryRow(ctx, `SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, pid2).Scan(&wait))
			done = wait != nil && *wait == "Lock"
		}
	}
	must(t, t1.Commit(ctx))
	must(t, <-second)
	must(t, t2.Commit(ctx))
	held, err := owned.NodeHeld(ctx, node)
	must(t, err)
	if held != 0 {
		t.Fatalf("the node holds %d after both releases, want 0", held)
	}
	wantNodeLoadExact(t, ctx, owned.Store)
}
