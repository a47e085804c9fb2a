package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/pgerr"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

// directGeneration commits generation 1 (or the next one) of a direct
// kind as the current generation, with max_active 100.
func directGeneration(t *testing.T, ctx context.Context, st *storetest.Owned) store.Generation {
	t.Helper()
	g := testGeneration("direct-test")
	g.Mode = store.ModeDirect
	g.Specification.MaxActive = 100
	seen := storetest.Seen(t, st)
	var out store.Generation
	var err error
	if _, ok := seen.Current(); ok {
		var r store.Replaced
		r, err = st.ReplaceGeneration(ctx, seen, g, store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
		out = r.Generation
	} else {
		out, err = st.CommitGeneration(ctx, seen, g)
	}
	must(t, err)
	if out.Mode != store.ModeDirect {
		t.Fatalf("committed mode %q, want direct", out.Mode)
	}
	return out
}

// directReady records a ready probe of generation under st's epoch.
func directReady(t *testing.T, ctx context.Context, st *storetest.Owned, generation uint64) {
	t.Helper()
	_, err := st.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(generation), Ready: true})
	must(t, err)
}

// directSession commits a Session of generation on the direct lane.
func directSession(t *testing.T, ctx context.Context, st *storetest.Owned, generation uint64, maxActive int) store.SessionBundle {
	t.Helper()
	p := sessionParams(t, maxActive)
	p.Generation = int64(generation)
	b, err := st.CreateSession(ctx, p)
	must(t, err)
	return b
}

func exec(t *testing.T, ctx context.Context, st *storetest.Owned, sql string, args ...any) error {
	t.Helper()
	_, err := st.Pool().Exec(ctx, sql, args...)
	return err
}

// wantHeld fails unless the lane's direct_load.held is want and equals a
// count of its unreleased placements and allocations.
func wantHeld(t *testing.T, ctx context.Context, st *storetest.Owned, want int64) {
	t.Helper()
	held, err := st.DirectHeld(ctx)
	must(t, err)
	var counted int64
	must(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM (
		SELECT environment_id FROM placements WHERE node_id IS NULL AND state <> 'released'
		UNION SELECT environment_id FROM allocations WHERE node_id IS NULL AND state <> 'released') h`).Scan(&counted))
	if held != want || counted != want {
		t.Fatalf("direct_load.held %d, counted %d, want %d", held, counted, want)
	}
}

// TestDirectCreateSessionPlacesOnTheLane: a Session of a direct generation
// is placed on the direct lane (placement and allocation node uuid.Nil),
// never on a node, although a node present for the generation exists;
// only while the generation's readiness is fresh (ready, recorded under
// the owner epoch holding the lease, younger than 45 s), and within
// max_active, with the fixed refusals direct_provider_not_ready and
// direct_capacity_full that write nothing.
func TestDirectCreateSessionPlacesOnTheLane(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 2)
	old, cur := epochs[0], epochs[1]
	wantLease(t, ctx, st, newUUID(t), cur, time.Hour, true, "lease")
	owned := storetest.As(st, cur)
	node := presentNode(t, ctx, owned) // present for generation 1, never chosen
	g := directGeneration(t, ctx, owned)

	create := func(maxActive int) (store.SessionBundle, error) {
		p := sessionParams(t, maxActive)
		p.Generation = int64(g.Generation)
		return owned.CreateSession(ctx, p)
	}
	notReady := func(what string) {
		t.Helper()
		_, err := create(10)
		wantClass(t, err, store.ErrDirectNotReady)
		wantClass(t, err, errdefs.ErrFailedPrecondition)
		if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "direct_provider_not_ready" {
			t.Fatalf("%s: %v", what, err)
		}
	}
	notReady("no readiness recorded")

	directReady(t, ctx, owned, g.Generation)
	b, err := create(10)
	must(t, err)
	if b.Placement.NodeID != store.DirectLane || b.Allocation.NodeID != store.DirectLane ||
		b.Placement.Generation != int64(g.Generation) || b.Allocation.Generation != int64(g.Generation) {
		t.Fatalf("direct Session placed %+v / %+v", b.Placement, b.Allocation)
	}
	if held, err := owned.NodeHeld(ctx, node); err != nil || held != 0 {
		t.Fatalf("node holds %d, %v", held, err)
	}
	wantHeld(t, ctx, owned, 1)

	// Stale: 46 s old by the database clock; 44 s still counts.
	must(t, exec(t, ctx, owned, "UPDATE direct_readiness SET checked_at = now() - interval '44 seconds'"))
	_, err = create(10)
	must(t, err)
	must(t, exec(t, ctx, owned, "UPDATE direct_readiness SET checked_at = now() - interval '46 seconds'"))
	notReady("stale")
	// Recorded under an epoch that does not hold the lease.
	directReady(t, ctx, owned, g.Generation)
	must(t, exec(t, ctx, owned, "UPDATE direct_readiness SET owner_epoch = $1", int64(old)))
	notReady("another epoch")
	// A failed probe.
	r, err := owned.RecordDirectReadiness(ctx, store.DirectReadiness{
		Generation: int64(g.Generation), DiagnosticCode: "probe_failed",
	})
	must(t, err)
	if r.Ready || r.Fresh || r.DiagnosticCode != "probe_failed" {
		t.Fatalf("recorded %+v", r)
	}
	notReady("not ready")
	got, err := owned.DirectReadiness(ctx, int64(g.Generation))
	must(t, err)
	if got.Ready || got.Fresh || got.DiagnosticCode != "probe_failed" || got.OwnerEpoch != cur {
		t.Fatalf("readiness %+v", got)
	}
	wantHeld(t, ctx, owned, 2)

	// max_active counts the lane's holdings.
	directReady(t, ctx, owned, g.Generation)
	_, err = create(3)
	must(t, err)
	_, err = create(3)
	wantClass(t, err, store.ErrDirectCapacityFull)
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "direct_capacity_full" {
		t.Fatalf("refusal %v", err)
	}
	wantHeld(t, ctx, owned, 3)
}

// TestDirectLoadExactUnderConcurrency: 32 concurrent creations with room
// for 20 place exactly 20 on the lane (direct_load's row lock: no two take
// the last slot), refuse 12 as direct_capacity_full, and direct_load.held
// equals the count of the lane's holdings; a deletion's terminal cleanup
// keeps it exact, and the released Environment stops counting.
func TestDirectLoadExactUnderConcurrency(t *testing.T) {
	st, ctx := ownedStore(t)
	g := directGeneration(t, ctx, st)
	directReady(t, ctx, st, g.Generation)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, full int
	var created []store.SessionBundle
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := sessionParams(t, 20)
			p.Generation = int64(g.Generation)
			b, err := st.CreateSession(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
				created = append(created, b)
			case errors.Is(err, store.ErrDirectCapacityFull):
				full++
			default:
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 20 || full != 12 {
		t.Fatalf("%d created, %d refused full; want 20 and 12", ok, full)
	}
	wantHeld(t, ctx, st, 20)

	// A deletion before Create was claimed ends the Environment: nothing
	// is owned, the allocation is released with the reservation.
	_, err := st.RequestSessionDeletion(ctx, created[0].Session.ID)
	must(t, err)
	wantHeld(t, ctx, st, 20) // cleanup requested: still held
	a, err := st.GetAllocation(ctx, created[0].Allocation.ID)
	must(t, err)
	storetest.Release(t, st, a)
	wantHeld(t, ctx, st, 19)
}

// TestLaneTriggersKeepTheLane: the database refuses a node placement for a
// direct generation and a lane placement for a node generation
// (placements_lane), and an allocation on another lane or of another
// generation than its placement (allocations_lane), whoever writes.
func TestLaneTriggersKeepTheLane(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	nodeGeneration(t, ctx, st)
	nodeSession := directSession(t, ctx, st, 1, 10)
	if nodeSession.Placement.NodeID != node {
		t.Fatalf("node Session on %s", nodeSession.Placement.NodeID)
	}
	g := directGeneration(t, ctx, st)
	directReady(t, ctx, st, g.Generation)
	b := directSession(t, ctx, st, g.Generation, 10)

	wantLane := func(err error, constraint string) {
		t.Helper()
		wantClass(t, err, errdefs.ErrInvalid)
		if err == nil || !strings.Contains(err.Error(), "constraint "+constraint+" violated") {
			t.Fatalf("error %v, want %s", err, constraint)
		}
	}
	classify := func(err error) error {
		if err == nil {
			return nil
		}
		return pgerr.Classify(err)
	}
	// A new Environment placed on a node for the direct generation.
	sess, env := newUUID(t), newUUID(t)
	tenant := store.DefaultTenantID
	must(t, exec(t, ctx, st, `INSERT INTO sessions (id, tenant_id, project_id, display_name, request_id) VALUES ($1, $2, $3, 'x', $4)`,
		sess, tenant, store.DefaultProjectID, newUUID(t)))
	must(t, exec(t, ctx, st, `INSERT INTO environments (id, session_id, tenant_id) VALUES ($1, $2, $3)`, env, sess, tenant))
	wantLane(classify(exec(t, ctx, st, `INSERT INTO placements (environment_id, node_id, generation) VALUES ($1, $2, $3)`,
		env, node, int64(g.Generation))), "placements_lane")
	// On the lane for a node generation.
	wantLane(classify(exec(t, ctx, st, `INSERT INTO placements (environment_id, node_id, generation) VALUES ($1, NULL, 1)`,
		env)), "placements_lane")
	// Moving a placement or an allocation off its lane, or to another
	// generation.
	wantLane(classify(exec(t, ctx, st, `UPDATE placements SET node_id = $1 WHERE environment_id = $2`,
		node, b.Environment.ID)), "placements_lane")
	wantLane(classify(exec(t, ctx, st, `UPDATE allocations SET node_id = $1 WHERE id = $2`,
		node, b.Allocation.ID)), "allocations_lane")
	wantLane(classify(exec(t, ctx, st, `UPDATE allocations SET node_id = NULL WHERE id = $1`,
		nodeSession.Allocation.ID)), "allocations_lane")
	wantLane(classify(exec(t, ctx, st, `UPDATE allocations SET generation = 1 WHERE id = $1`,
		b.Allocation.ID)), "allocations_lane")
	wantHeld(t, ctx, st, 1)
}

// nodeGeneration commits generation 1, Docker's (mode nodes), for a
// present node of generation 1 (presentNode).
func nodeGeneration(t *testing.T, ctx context.Context, st *storetest.Owned) {
	t.Helper()
	g, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker"))
	must(t, err)
	if g.Generation != 1 || g.Mode != store.ModeNodes {
		t.Fatalf("node generation %d mode %q", g.Generation, g.Mode)
	}
}

// TestDirectScansReturnOnlyTheLane: the pending, allocation and
// observation scans of DirectLane return only the lane's rows, and the
// node's scans only the node's, 32 to a page with the cursor wrapping
// after an empty page.
func TestDirectScansReturnOnlyTheLane(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	nodeGeneration(t, ctx, st)
	for range 3 {
		directSession(t, ctx, st, 1, 100) // generation 1: on the node
	}
	g := directGeneration(t, ctx, st)
	directReady(t, ctx, st, g.Generation)
	want := map[uuid.UUID]bool{}
	for i := range 40 {
		b := directSession(t, ctx, st, g.Generation, 100)
		want[b.Allocation.ID] = true
		if i < 35 {
			a, err := st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
			must(t, err)
			_, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{
				Kind: store.CreateRunning, ProviderID: "d-" + a.ID.String(), BootstrapComplete: true,
			})
			must(t, err)
		}
	}
	pending := func(lane uuid.UUID) (ids []uuid.UUID, sizes []int) {
		after := uuid.Nil
		for {
			p, err := st.ListPendingForNode(ctx, lane, after, store.NodePageSize)
			must(t, err)
			sizes = append(sizes, len(p))
			if len(p) == 0 {
				return ids, sizes
			}
			for _, x := range p {
				ids = append(ids, x.AllocationID)
			}
			after = p[len(p)-1].EnvironmentID
		}
	}
	allocs := func(lane uuid.UUID) (ids []uuid.UUID, sizes []int) {
		after := uuid.Nil
		for {
			p, err := st.ListAllocationWorkForNode(ctx, lane, after, store.NodePageSize)
			must(t, err)
			sizes = append(sizes, len(p))
			if len(p) == 0 {
				return ids, sizes
			}
			for _, a := range p {
				if a.NodeID != lane {
					t.Fatalf("allocation %s on %s in the scan of %s", a.ID, a.NodeID, lane)
				}
				ids = append(ids, a.ID)
			}
			after = p[len(p)-1].ID
		}
	}
	observable := func(lane uuid.UUID) (ids []uuid.UUID, sizes []int) {
		after := uuid.Nil
		for {
			p, err := st.ListObservableForNode(ctx, store.ObservableScan{
				NodeID: lane, After: after, Limit: store.NodePageSize,
				ObserveAfter: time.Second, KeepaliveAfter: time.Second,
			})
			must(t, err)
			sizes = append(sizes, len(p))
			if len(p) == 0 {
				return ids, sizes
			}
			for _, o := range p {
				ids = append(ids, o.Allocation.ID)
			}
			after = p[len(p)-1].Allocation.ID
		}
	}
	if store.NodePageSize != 32 {
		t.Fatalf("NodePageSize %d", store.NodePageSize)
	}
	// Allocated and running allocations are not the allocation scan's.
	ids, sizes := allocs(store.DirectLane)
	if len(ids) != 0 {
		t.Fatalf("direct allocation work %d in pages %v", len(ids), sizes)
	}
	ids, sizes = pending(store.DirectLane)
	if len(ids) != 5 || sizes[0] != 5 {
		t.Fatalf("direct pending %v in pages %v", ids, sizes)
	}
	for _, id := range ids {
		if !want[id] {
			t.Fatalf("direct pending listed %s", id)
		}
	}
	ids, sizes = observable(store.DirectLane)
	if len(ids) != 35 || sizes[0] != 32 || sizes[1] != 3 {
		t.Fatalf("direct observable %d in pages %v", len(ids), sizes)
	}
	for _, id := range ids {
		if !want[id] {
			t.Fatalf("direct observable listed %s", id)
		}
	}
	// Their cleanup requested, the running ones are.
	for _, id := range ids {
		_, err := st.RequestCleanup(ctx, id)
		must(t, err)
	}
	cleanups, sizes := allocs(store.DirectLane)
	if len(cleanups) != 35 || sizes[0] != 32 || sizes[1] != 3 || sizes[2] != 0 || !slices.Equal(cleanups, ids) {
		t.Fatalf("direct allocation work %d in pages %v", len(cleanups), sizes)
	}
	// The node's scans hold only its 3 Sessions (allocated: no
	// allocation work).
	if ids, _ := allocs(node); len(ids) != 0 {
		t.Fatalf("node allocation work %d", len(ids))
	}
	if ids, _ := pending(node); len(ids) != 3 {
		t.Fatalf("node pending %d", len(ids))
	}
	if ids, _ := observable(node); len(ids) != 0 {
		t.Fatalf("node observable %d", len(ids))
	}
}

// TestDirectAllocatePendingStaysOnTheLane: a direct allocation whose
// Create settled by an absence receipt is released with its reservation
// kept on the lane; the direct worker (DirectLane) allocates it again on
// the lane under the placement's generation, and a node's worker may not.
func TestDirectAllocatePendingStaysOnTheLane(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	g := directGeneration(t, ctx, st)
	directReady(t, ctx, st, g.Generation)
	b := directSession(t, ctx, st, g.Generation, 10)
	a, err := st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateAbsent})
	must(t, err)
	a, err = st.ResolveCreateFailure(ctx, a.ID, a.Revision)
	must(t, err)
	storetest.Release(t, st, a)

	got, err := st.GetSession(ctx, b.Session.ID)
	must(t, err)
	if got.Placement.State != store.PlacementReserved || got.Placement.NodeID != store.DirectLane ||
		got.Allocation.ID != uuid.Nil {
		t.Fatalf("after release: %+v", got)
	}
	wantHeld(t, ctx, st, 1)
	params := func(lane uuid.UUID) store.PendingAllocationParams {
		return store.PendingAllocationParams{
			EnvironmentID: b.Environment.ID, NodeID: lane, AllocationID: newUUID(t), DeviceID: newUUID(t),
			CredentialDigest: hash(randomBytes(t, 32)), CredentialCiphertext: randomBytes(t, 48),
			CredentialNonce: randomBytes(t, 12), CreateReceipt: newUUID(t),
		}
	}
	_, err = st.AllocatePending(ctx, params(node))
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	second, err := st.AllocatePending(ctx, params(store.DirectLane))
	must(t, err)
	if second.NodeID != store.DirectLane || second.Generation != int64(g.Generation) || second.State != store.AllocationAllocated {
		t.Fatalf("re-allocated %+v", second)
	}
	wantHeld(t, ctx, st, 1)
}

// TestDirectWorkIsNotified: a committed direct Session, its deletion's
// terminal cleanup and an abandoned Create queue direct_work with the nil
// id, never node_work.
func TestDirectWorkIsNotified(t *testing.T) {
	st, ctx := ownedStore(t)
	g := directGeneration(t, ctx, st)
	directReady(t, ctx, st, g.Generation)
	got := make(chan string, 64)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.ListenEvents(lctx, func(p string) { got <- p }) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("ListenEvents: %v", err)
		}
	})
	want := store.DirectWorkEvent + ":" + uuid.Nil.String()
	wait := func(what string) {
		t.Helper()
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("%s notified %q, want %q", what, p, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification for %s", what)
		}
	}
	var b store.SessionBundle
	for range 50 {
		b = directSession(t, ctx, st, g.Generation, 100)
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("creation notified %q, want %q", p, want)
			}
			goto listening
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("the listener never heard a committed direct Session")
listening:
	// An abandoned Create: claimed, outcome unknown, abandoned.
	c := directSession(t, ctx, st, g.Generation, 100)
	wait("creation")
	a, err := st.ClaimCreate(ctx, c.Allocation.ID, c.Allocation.CreateReceipt)
	must(t, err)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateUnknown})
	must(t, err)
	must(t, exec(t, ctx, st, "UPDATE allocations SET create_dispatched_at = now() - interval '1 minute' WHERE id = $1", a.ID))
	_, abandoned, err := st.AbandonCreate(ctx, a.ID, a.Revision, time.Second)
	must(t, err)
	if !abandoned {
		t.Fatal("create not abandoned")
	}
	wait("abandonment")
	_, err = st.RequestSessionDeletion(ctx, b.Session.ID)
	must(t, err)
	wait("deletion")
}

// TestListNodeGenerationsExcludesDirect: an enabled node is never
// published a current direct generation; a node generation committed
// after it is published.
func TestListNodeGenerationsExcludesDirect(t *testing.T) {
	st, ctx := ownedStore(t)
	node := enabledNode(t, ctx, st)
	directGeneration(t, ctx, st)
	gens, err := st.NodeGenerations(ctx, node)
	must(t, err)
	if len(gens) != 0 {
		t.Fatalf("node publishes %d generations of a direct deployment", len(gens))
	}
	r2, err := st.ReplaceGeneration(ctx, storetest.Seen(t, st), testGeneration("docker"), store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	g2 := r2.Generation
	if g2.Mode != store.ModeNodes {
		t.Fatalf("node generation stored mode %q", g2.Mode)
	}
	gens, err = st.NodeGenerations(ctx, node)
	must(t, err)
	if len(gens) != 1 || gens[0].Generation != g2.Generation {
		t.Fatalf("node publishes %+v", gens)
	}
}

// TestRecordDirectReadinessIsFenced: readiness is written only under the
// owner epoch holding the lease, a newer epoch's record is never
// overwritten by an older one, the backend fingerprint is bound once, and
// a node generation takes no direct readiness.
func TestRecordDirectReadinessIsFenced(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 2)
	old, cur := epochs[0], epochs[1]
	wantLease(t, ctx, st, newUUID(t), old, time.Millisecond, true, "old lease")
	owned := storetest.As(st, old)
	g := directGeneration(t, ctx, owned)
	time.Sleep(5 * time.Millisecond)
	wantLease(t, ctx, st, newUUID(t), cur, time.Hour, true, "new lease")

	_, err := owned.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(g.Generation), Ready: true})
	wantClass(t, err, store.ErrSuperseded)
	_, err = owned.DirectReadiness(ctx, int64(g.Generation))
	wantClass(t, err, errdefs.ErrNotFound)

	now := storetest.As(st, cur)
	r, err := now.RecordDirectReadiness(ctx, store.DirectReadiness{
		Generation: int64(g.Generation), Ready: true, BackendFingerprint: "team-a",
	})
	must(t, err)
	if !r.Ready || r.OwnerEpoch != cur || r.BackendFingerprint != "team-a" {
		t.Fatalf("recorded %+v", r)
	}
	r, err = now.RecordDirectReadiness(ctx, store.DirectReadiness{
		Generation: int64(g.Generation), Ready: true, BackendFingerprint: "team-b",
	})
	must(t, err)
	if r.BackendFingerprint != "team-a" {
		t.Fatalf("fingerprint rebound to %q", r.BackendFingerprint)
	}
	got, err := now.DirectReadiness(ctx, int64(g.Generation))
	must(t, err)
	if !got.Fresh {
		t.Fatalf("readiness not fresh: %+v", got)
	}
	// Even a write that passed the lease fence never overwrites a newer
	// epoch's row (the epoch condition of the upsert).
	must(t, exec(t, ctx, now, "UPDATE direct_readiness SET owner_epoch = owner_epoch + 1"))
	_, err = now.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(g.Generation), Ready: true})
	wantClass(t, err, store.ErrSuperseded)

	// A node generation has no direct readiness; bad input is refused.
	r2, err := now.ReplaceGeneration(ctx, storetest.Seen(t, now), testGeneration("docker"), store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	g2 := r2.Generation
	_, err = now.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(g2.Generation), Ready: true})
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	_, err = now.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(g.Generation), Ready: true, DiagnosticCode: "x"})
	wantClass(t, err, errdefs.ErrInvalid)
	_, err = now.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(g.Generation), DiagnosticCode: "Bad Code"})
	wantClass(t, err, errdefs.ErrInvalid)
}

// TestKeyReplacementRepointsOnlyWhatWasVerified: a key replacement
// (Replacement.Rekey) that leaves out a direct generation of the kind
// holding a Session is refused deployment_generations_moved and commits
// nothing; one that lists it commits the new generation and points the
// listed generation at its credential (CredentialSource), in one
// transaction; a generation without a row uses its own.
func TestKeyReplacementRepointsOnlyWhatWasVerified(t *testing.T) {
	st, ctx := newStore(t)
	owned := storetest.Owner(t, st)
	g1 := directGeneration(t, ctx, owned)
	directReady(t, ctx, owned, g1.Generation)
	directSession(t, ctx, owned, g1.Generation, 10)

	next := testGeneration("direct-test")
	next.Mode = store.ModeDirect
	next.Specification.MaxActive = 100
	_, err := owned.ReplaceGeneration(ctx, storetest.Seen(t, owned), next, store.Replacement{Rekey: []uint64{}}, store.NewAdminProvenance(uuid.New()), uuid.New())
	wantClass(t, err, store.ErrGenerationsMoved)
	if cur, err := owned.CurrentGeneration(ctx); err != nil || cur.Generation != g1.Generation {
		t.Fatalf("current %d, %v after the refusal", cur.Generation, err)
	}

	r, err := owned.ReplaceGeneration(ctx, storetest.Seen(t, owned), next, store.Replacement{Rekey: []uint64{g1.Generation}}, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	for g, want := range map[uint64]uint64{g1.Generation: r.Generation.Generation, r.Generation.Generation: r.Generation.Generation} {
		if src, err := owned.CredentialSource(ctx, g); err != nil || src != want {
			t.Fatalf("credential source of %d: %d, %v; want %d", g, src, err, want)
		}
	}
	held, err := owned.HeldDirectGenerations(ctx, "direct-test")
	must(t, err)
	if len(held) != 1 || held[0] != g1.Generation {
		t.Fatalf("held direct generations %v", held)
	}
}
