package store_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

func TestClaimCreateWinsOnceWithTheFreshReceipt(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	p, _ := newSession(t, ctx, st)

	_, err := st.ClaimCreate(ctx, p.AllocationID, newUUID(t))
	wantClass(t, err, errdefs.ErrFenced)
	_, err = st.ClaimCreate(ctx, newUUID(t), p.CreateReceipt)
	wantClass(t, err, errdefs.ErrNotFound)

	const callers = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := st.ClaimCreate(ctx, p.AllocationID, p.CreateReceipt)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
				if a.State != store.AllocationCreateDispatched || a.CreateDispatchedAt == nil || a.Revision != 2 {
					t.Errorf("claimed = %+v", a)
				}
			case !errdefs.IsFenced(err):
				t.Errorf("losing claim: %v, want ErrFenced", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d claims won, want exactly 1", wins)
	}
	// Later, after an unknown outcome: still no second claim.
	a, err := st.GetAllocation(ctx, p.AllocationID)
	must(t, err)
	_, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateUnknown})
	must(t, err)
	_, err = st.ClaimCreate(ctx, p.AllocationID, p.CreateReceipt)
	wantClass(t, err, errdefs.ErrFenced)
}

func TestReleaseNeedsConfirmedCleanupAndSettledCreation(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	p, _ := newSession(t, ctx, st)
	a, err := st.ClaimCreate(ctx, p.AllocationID, p.CreateReceipt)
	must(t, err)

	// Another attempt's receipt is fenced.
	_, err = st.RecordCreateOutcome(ctx, store.CreateAttempt{AllocationID: a.ID, Receipt: newUUID(t)}, store.CreateOutcome{Kind: store.CreateUnknown})
	wantClass(t, err, errdefs.ErrFenced)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateUnknown})
	must(t, err)
	if a.State != store.AllocationCreateUnknown || a.CreationSettled() {
		t.Fatalf("after unknown outcome: %+v", a)
	}
	_, err = st.Release(ctx, a.ID)
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	_, err = st.RecordCleanup(ctx, a.ID, a.Revision, true)
	wantClass(t, err, errdefs.ErrFailedPrecondition) // cleanup not requested

	a, err = st.RequestCleanup(ctx, a.ID)
	must(t, err)
	if a.State != store.AllocationCleanupRequested || a.CleanupRequestedAt == nil {
		t.Fatalf("after cleanup request: %+v", a)
	}
	// Cleanup confirmed, but the unknown creation keeps ownership.
	a, err = st.RecordCleanup(ctx, a.ID, a.Revision, true)
	must(t, err)
	if a.State != store.AllocationCleanupConfirmed || a.CleanupConfirmedAt == nil {
		t.Fatalf("after confirmed cleanup: %+v", a)
	}
	_, err = st.Release(ctx, a.ID)
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	holds, err := st.NodeHolds(ctx, node)
	must(t, err)
	if !holds {
		t.Fatal("an unknown creation must keep the node's reservation")
	}

	// A late resource appears: cleanup is unknown again; its observation
	// settles creation (state stays in cleanup).
	a, err = st.RecordCleanup(ctx, a.ID, a.Revision, false)
	must(t, err)
	if a.State != store.AllocationCleanupUnknown || a.CleanupConfirmedAt != nil {
		t.Fatalf("after late resource: %+v", a)
	}
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{
		Kind: store.CreateRunning, ProviderID: "ctr-1", BootstrapComplete: true,
	})
	must(t, err)
	if a.State != store.AllocationCleanupUnknown || !a.CreateSettled || a.ProviderID != "ctr-1" {
		t.Fatalf("after late running observation: %+v", a)
	}
	_, err = st.Release(ctx, a.ID)
	wantClass(t, err, errdefs.ErrFailedPrecondition) // cleanup not confirmed
	a = storetest.Release(t, st, a)
	if a.State != store.AllocationReleased || a.ReleasedAt == nil {
		t.Fatalf("released = %+v", a)
	}
	// The Session is active and its Environment pending: the Environment
	// keeps its reservation (and waits for a new allocation).
	pl, err := st.GetPlacement(ctx, p.EnvironmentID)
	must(t, err)
	if pl.State != store.PlacementReserved || pl.ReleasedAt != nil {
		t.Fatalf("placement after release of an active Session's allocation = %+v", pl)
	}
	// Releasing again returns it unchanged; nothing else moves it.
	again, err := st.Release(ctx, a.ID)
	must(t, err)
	if again.Revision != a.Revision {
		t.Errorf("second release changed revision %d to %d", a.Revision, again.Revision)
	}
	_, err = st.RequestCleanup(ctx, a.ID)
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	holds, err = st.NodeHolds(ctx, node)
	must(t, err)
	if !holds {
		t.Error("the pending Environment's reservation was dropped")
	}
	// Deleting the Session, which owns no compute now, ends the
	// reservation at once.
	b, err := st.RequestSessionDeletion(ctx, p.SessionID)
	must(t, err)
	if b.Placement.State != store.PlacementReleased || b.Placement.ReleasedAt == nil || b.Allocation.ID != uuid.Nil {
		t.Fatalf("deletion without an allocation: %+v", b)
	}
	holds, err = st.NodeHolds(ctx, node)
	must(t, err)
	if holds {
		t.Error("node holds after release")
	}
}

func TestRecordCreateOutcomeTransitions(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	claimed := func() store.Allocation {
		p := sessionParams(t, 50)
		_, err := st.CreateSession(ctx, p)
		must(t, err)
		a, err := st.ClaimCreate(ctx, p.AllocationID, p.CreateReceipt)
		must(t, err)
		return a
	}

	// Never claimed: no outcome can be recorded.
	p := sessionParams(t, 50)
	b, err := st.CreateSession(ctx, p)
	must(t, err)
	_, err = st.RecordCreateOutcome(ctx, b.Allocation.CreateAttempt(), store.CreateOutcome{Kind: store.CreateUnknown})
	wantClass(t, err, errdefs.ErrFailedPrecondition)

	// Running without bootstrap: running, not settled; then with bootstrap.
	a := claimed()
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "ctr-a"})
	must(t, err)
	if a.State != store.AllocationRunning || a.CreateSettled || a.CreationSettled() {
		t.Fatalf("running without bootstrap: %+v", a)
	}
	pl, err := st.GetPlacement(ctx, a.EnvironmentID)
	must(t, err)
	if pl.State != store.PlacementActive {
		t.Errorf("placement %s, want active", pl.State)
	}
	_, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "other", BootstrapComplete: true})
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "ctr-a", BootstrapComplete: true})
	must(t, err)
	if !a.CreateSettled || !a.BootstrapComplete {
		t.Fatalf("running with bootstrap: %+v", a)
	}
	_, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateAbsent})
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	_, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateUnknown})
	wantClass(t, err, errdefs.ErrFailedPrecondition)

	// An explicit absence receipt settles creation as failed.
	a = claimed()
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateAbsent})
	must(t, err)
	if a.State != store.AllocationCreateFailed || !a.AbsenceReceipt || !a.CreationSettled() {
		t.Fatalf("absent: %+v", a)
	}
	_, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "late"})
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	a, err = st.RequestCleanup(ctx, a.ID)
	must(t, err)
	storetest.Release(t, st, a)

	// Malformed outcomes.
	a = claimed()
	for _, o := range []store.CreateOutcome{
		{},
		{Kind: store.CreateRunning},
		{Kind: store.CreateUnknown, ProviderID: "x"},
		{Kind: store.CreateAbsent, BootstrapComplete: true},
	} {
		_, err := st.RecordCreateOutcome(ctx, a.CreateAttempt(), o)
		wantClass(t, err, errdefs.ErrInvalid)
	}
}

func TestPerNodePagingFiltersByNodeBeforeTheLimit(t *testing.T) {
	st, ctx := ownedStore(t)
	nodes := []uuid.UUID{presentNode(t, ctx, st), presentNode(t, ctx, st)}
	const perNode = 40 // more than one 32-row page
	want := map[uuid.UUID][]uuid.UUID{}
	pendingWant := map[uuid.UUID][]uuid.UUID{}
	// Interleaved creation: placement alternates between the two nodes
	// (least held first), so their ids interleave in id order.
	for range 2 * perNode {
		b, err := st.CreateSession(ctx, sessionParams(t, perNode))
		must(t, err)
		want[b.Placement.NodeID] = append(want[b.Placement.NodeID], b.Allocation.ID)
		pendingWant[b.Placement.NodeID] = append(pendingWant[b.Placement.NodeID], b.Environment.ID)
	}
	for _, n := range nodes {
		if len(want[n]) != perNode {
			t.Fatalf("node %s got %d allocations, want %d", n, len(want[n]), perNode)
		}
		slices.SortFunc(want[n], func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		slices.SortFunc(pendingWant[n], func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	}

	pages := func(n uuid.UUID) (got []uuid.UUID, sizes []int) {
		after := uuid.Nil
		for {
			page, err := st.ListAllocationWorkForNode(ctx, n, after, store.NodePageSize)
			must(t, err)
			if len(page) == 0 {
				return got, sizes // the caller wraps to uuid.Nil here
			}
			sizes = append(sizes, len(page))
			for _, a := range page {
				if a.NodeID != n {
					t.Fatalf("node %s page holds allocation of node %s", n, a.NodeID)
				}
				got = append(got, a.ID)
			}
			after = page[len(page)-1].ID
		}
	}

	for _, n := range nodes {
		// Allocated (Create not claimed): the pending scan's, not the
		// allocation scan's.
		if got, _ := pages(n); len(got) != 0 {
			t.Errorf("node %s: %d allocated allocations in the allocation scan", n, len(got))
		}
		var pending []uuid.UUID
		var sizes []int
		after := uuid.Nil
		for {
			page, err := st.ListPendingForNode(ctx, n, after, store.NodePageSize)
			must(t, err)
			if len(page) == 0 {
				break
			}
			sizes = append(sizes, len(page))
			for _, pe := range page {
				if pe.AllocationID == uuid.Nil || pe.SessionState != store.SessionActive || pe.Generation != 1 {
					t.Fatalf("pending row %+v", pe)
				}
				pending = append(pending, pe.EnvironmentID)
			}
			after = page[len(page)-1].EnvironmentID
		}
		if !slices.Equal(sizes, []int{32, 8}) || !slices.Equal(pending, pendingWant[n]) {
			t.Errorf("node %s pending: page sizes %v, %d ids", n, sizes, len(pending))
		}
	}

	// A claimed allocation (creation dispatched, its outcome unknown until
	// recorded) leaves the pending scan and enters the allocation scan.
	for _, n := range nodes {
		for _, id := range want[n] {
			b, err := st.GetAllocation(ctx, id)
			must(t, err)
			_, err = st.ClaimCreate(ctx, b.ID, b.CreateReceipt)
			must(t, err)
		}
	}
	for _, n := range nodes {
		got, sizes := pages(n)
		if !slices.Equal(sizes, []int{32, 8}) || !slices.Equal(got, want[n]) {
			t.Errorf("node %s: page sizes %v, %d ids (in order: %v)", n, sizes, len(got), slices.Equal(got, want[n]))
		}
		page, err := st.ListPendingForNode(ctx, n, uuid.Nil, store.NodePageSize)
		must(t, err)
		if len(page) != 0 {
			t.Errorf("node %s: %d claimed allocations still pending", n, len(page))
		}
	}

	// Running (its creation settled): the observation scan's, not the
	// allocation scan's.
	n := nodes[0]
	b, err := st.GetAllocation(ctx, want[n][0])
	must(t, err)
	_, err = st.RecordCreateOutcome(ctx, b.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c", BootstrapComplete: true})
	must(t, err)
	if got, _ := pages(n); slices.Contains(got, b.ID) || len(got) != perNode-1 {
		t.Errorf("node %s: the running allocation is in the allocation scan (%d rows)", n, len(got))
	}

	for _, bad := range []int{0, store.NodePageSize + 1} {
		_, err := st.ListAllocationWorkForNode(ctx, n, uuid.Nil, bad)
		wantClass(t, err, errdefs.ErrInvalid)
		_, err = st.ListPendingForNode(ctx, n, uuid.Nil, bad)
		wantClass(t, err, errdefs.ErrInvalid)
	}
}

func TestNodeHolds(t *testing.T) {
	st, ctx := ownedStore(t)
	node, empty := presentNode(t, ctx, st), enabledNode(t, ctx, st)
	newSession(t, ctx, st)
	for n, want := range map[uuid.UUID]bool{node: true, empty: false, newUUID(t): false} {
		got, err := st.NodeHolds(ctx, n)
		must(t, err)
		if got != want {
			t.Errorf("NodeHolds(%s) = %v, want %v", n, got, want)
		}
	}
}

// TestFailedCreateIsCleanedUpReleasedAndReallocated: a Create settled by an
// absence receipt is create_failed; resolving it requests cleanup, and the
// released allocation leaves the active Session's Environment pending with
// its reservation on the same node and no allocation, which
// AllocatePending then gives a new allocation (new Reference, credential
// and receipt). After MaxCreateAttempts settled failures the Environment is
// recorded failed and its reservation released.
func TestFailedCreateIsCleanedUpReleasedAndReallocated(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	other := enabledNode(t, ctx, st)
	p, b := newSession(t, ctx, st)
	env := b.Environment.ID

	pendingParams := func(on uuid.UUID) store.PendingAllocationParams {
		return store.PendingAllocationParams{
			EnvironmentID: env, NodeID: on, AllocationID: newUUID(t), DeviceID: newUUID(t),
			CredentialDigest: hash(randomBytes(t, 32)), CredentialCiphertext: randomBytes(t, 48),
			CredentialNonce: randomBytes(t, 12), CreateReceipt: newUUID(t),
		}
	}
	// An existing allocation never re-enters the pending path.
	_, err := st.AllocatePending(ctx, pendingParams(node))
	wantClass(t, err, errdefs.ErrExists)

	// fail claims a, records an absence receipt, resolves and releases it.
	fail := func(a store.Allocation) store.Allocation {
		t.Helper()
		a, err := st.ClaimCreate(ctx, a.ID, a.CreateReceipt)
		must(t, err)
		a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateAbsent})
		must(t, err)
		if a.State != store.AllocationCreateFailed || !a.AbsenceReceipt || !a.CreationSettled() {
			t.Fatalf("after absence receipt: %+v", a)
		}
		_, err = st.ResolveCreateFailure(ctx, a.ID, a.Revision-1)
		wantClass(t, err, errdefs.ErrFenced) // stale revision
		a, err = st.ResolveCreateFailure(ctx, a.ID, a.Revision)
		must(t, err)
		if a.State != store.AllocationCleanupRequested {
			t.Fatalf("after resolve: %+v", a)
		}
		_, err = st.ResolveCreateFailure(ctx, a.ID, a.Revision)
		wantClass(t, err, errdefs.ErrFailedPrecondition) // not create_failed any more
		// Not released before cleanup is confirmed.
		_, err = st.Release(ctx, a.ID)
		wantClass(t, err, errdefs.ErrFailedPrecondition)
		a = storetest.Release(t, st, a)
		return a
	}

	first := fail(b.Allocation)
	got, err := st.GetSession(ctx, p.SessionID)
	must(t, err)
	if got.Environment.State != store.EnvironmentPending || got.Allocation.ID != uuid.Nil ||
		got.Placement.State != store.PlacementReserved || got.Placement.NodeID != node {
		t.Fatalf("after the first failure: %+v", got)
	}
	held, err := st.NodeHeld(ctx, node)
	must(t, err)
	if held != 1 {
		t.Fatalf("node holds %d after the first failure, want 1 (the reservation)", held)
	}
	page, err := st.ListPendingForNode(ctx, node, uuid.Nil, store.NodePageSize)
	must(t, err)
	if len(page) != 1 || page[0].EnvironmentID != env || page[0].AllocationID != uuid.Nil {
		t.Fatalf("pending page %+v, want the Environment without an allocation", page)
	}

	// Another node's worker may not allocate it.
	_, err = st.AllocatePending(ctx, pendingParams(other))
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	second, err := st.AllocatePending(ctx, pendingParams(node))
	must(t, err)
	if second.ID == first.ID || second.CreateReceipt == first.CreateReceipt || second.DeviceID == first.DeviceID ||
		bytes.Equal(second.CredentialDigest, first.CredentialDigest) ||
		second.NodeID != node || second.Generation != first.Generation || second.EnvironmentID != env ||
		second.State != store.AllocationAllocated {
		t.Fatalf("new allocation %+v after %+v", second, first)
	}
	_, err = st.AllocatePending(ctx, pendingParams(node))
	wantClass(t, err, errdefs.ErrExists)

	fail(second)
	third, err := st.AllocatePending(ctx, pendingParams(node))
	must(t, err)
	last := fail(third)
	if last.State != store.AllocationReleased {
		t.Fatalf("third failure: %+v", last)
	}
	got, err = st.GetSession(ctx, p.SessionID)
	must(t, err)
	if got.Environment.State != store.EnvironmentFailed || got.Environment.FailureCode != store.FailureCreateFailed ||
		got.Placement.State != store.PlacementReleased || got.Allocation.ID != uuid.Nil {
		t.Fatalf("after %d failures: %+v", store.MaxCreateAttempts, got)
	}
	page, err = st.ListPendingForNode(ctx, node, uuid.Nil, store.NodePageSize)
	must(t, err)
	if len(page) != 0 {
		t.Fatalf("a failed Environment is still pending: %+v", page)
	}
	_, err = st.AllocatePending(ctx, pendingParams(node))
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	holds, err := st.NodeHolds(ctx, node)
	must(t, err)
	if holds {
		t.Error("node holds after the Environment failed")
	}
	wantNodeLoadExact(t, ctx, st.Store)
}

// TestDeletionEndsAPendingEnvironmentWithoutAllocation: deleting a Session
// whose Environment waits for a new allocation releases its reservation,
// and the pending path refuses it afterwards.
func TestDeletionEndsAPendingEnvironmentWithoutAllocation(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	p, b := newSession(t, ctx, st)
	a, err := st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateAbsent})
	must(t, err)
	a, err = st.ResolveCreateFailure(ctx, a.ID, a.Revision)
	must(t, err)
	storetest.Release(t, st, a)
	got, err := st.RequestSessionDeletion(ctx, p.SessionID)
	must(t, err)
	if got.Placement.State != store.PlacementReleased || got.Allocation.ID != uuid.Nil {
		t.Fatalf("after deletion: %+v", got)
	}
	_, err = st.AllocatePending(ctx, store.PendingAllocationParams{
		EnvironmentID: p.EnvironmentID, NodeID: node, AllocationID: newUUID(t), DeviceID: newUUID(t),
		CredentialDigest: hash(randomBytes(t, 32)), CredentialCiphertext: randomBytes(t, 48),
		CredentialNonce: randomBytes(t, 12), CreateReceipt: newUUID(t),
	})
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	page, err := st.ListPendingForNode(ctx, node, uuid.Nil, store.NodePageSize)
	must(t, err)
	if len(page) != 0 {
		t.Fatalf("pending after deletion: %+v", page)
	}
}

// TestCreateOutcomeAfterDeletionStands: a Session deleted while its Create
// is in flight (cleanup requested between ClaimCreate and the outcome)
// keeps both the deletion and the outcome. The outcome records only the
// settlement evidence (the state stays in cleanup); a settled creation is
// released after confirmed cleanup, with its placement, while an unknown
// one keeps its cleanup ownership and the node's reservation.
func TestCreateOutcomeAfterDeletionStands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome store.CreateOutcome
		settled bool
	}{
		{"running", store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "ctr-1", BootstrapComplete: true}, true},
		{"running without bootstrap", store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "ctr-1"}, false},
		{"absent", store.CreateOutcome{Kind: store.CreateAbsent}, true},
		{"unknown", store.CreateOutcome{Kind: store.CreateUnknown}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ctx := ownedStore(t)
			node := presentNode(t, ctx, st)
			p := sessionParams(t, 1)
			_, err := st.CreateSession(ctx, p)
			must(t, err)
			claimed, err := st.ClaimCreate(ctx, p.AllocationID, p.CreateReceipt)
			must(t, err)
			b, err := st.RequestSessionDeletion(ctx, p.SessionID)
			must(t, err)
			if b.Allocation.State != store.AllocationCleanupRequested || b.Allocation.Revision == claimed.Revision {
				t.Fatalf("deletion did not move the allocation: %+v", b.Allocation)
			}

			a, err := st.RecordCreateOutcome(ctx, claimed.CreateAttempt(), tc.outcome)
			must(t, err)
			if a.State != store.AllocationCleanupRequested || a.CreationSettled() != tc.settled ||
				a.ProviderID != tc.outcome.ProviderID || a.AbsenceReceipt != (tc.outcome.Kind == store.CreateAbsent) {
				t.Fatalf("after the outcome: %+v", a)
			}
			sess, err := st.GetSession(ctx, p.SessionID)
			must(t, err)
			if sess.Session.State != store.SessionDeleteRequested || sess.Placement.State == store.PlacementActive {
				t.Fatalf("the outcome undid the deletion: %+v", sess)
			}

			a, err = st.RecordCleanup(ctx, a.ID, a.Revision, true)
			must(t, err)
			_, err = st.Release(ctx, a.ID)
			if !tc.settled {
				wantClass(t, err, errdefs.ErrFailedPrecondition)
				holds, err := st.NodeHolds(ctx, node)
				must(t, err)
				if !holds {
					t.Fatal("an unsettled creation dropped the node's reservation")
				}
				return
			}
			must(t, err)
			pl, err := st.GetPlacement(ctx, p.EnvironmentID)
			must(t, err)
			if pl.State != store.PlacementReleased {
				t.Fatalf("placement %s after release", pl.State)
			}
			// The capacity is free: max_active 1 places another Session.
			_, err = st.CreateSession(ctx, sessionParams(t, 1))
			must(t, err)
		})
	}
}

// TestRunningOutcomeTakesBackConfirmedCleanup: a resource observed after
// cleanup was confirmed may have appeared after the Kill that confirmed
// it, so the confirmation is taken back and Release waits for another.
func TestRunningOutcomeTakesBackConfirmedCleanup(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	p, _ := newSession(t, ctx, st)
	a, err := st.ClaimCreate(ctx, p.AllocationID, p.CreateReceipt)
	must(t, err)
	a, err = st.RequestCleanup(ctx, a.ID)
	must(t, err)
	a, err = st.RecordCleanup(ctx, a.ID, a.Revision, true)
	must(t, err)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "late", BootstrapComplete: true})
	must(t, err)
	if a.State != store.AllocationCleanupUnknown || !a.CreateSettled || a.CleanupConfirmedAt != nil {
		t.Fatalf("after a late running observation: %+v", a)
	}
	_, err = st.Release(ctx, a.ID)
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	storetest.Release(t, st, a)
}

// TestRefusedCreateOutcomeChangesNothing: an outcome of another attempt
// (a made-up receipt, another allocation's, the Environment's previous
// allocation's) is ErrFenced; one that contradicts the record is
// ErrFailedPrecondition, before and during cleanup. A refused call writes
// nothing: the allocation (revision included) and its placement stay.
func TestRefusedCreateOutcomeChangesNothing(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	newSession := func() store.CreateSessionParams {
		p := sessionParams(t, 50)
		_, err := st.CreateSession(ctx, p)
		must(t, err)
		return p
	}
	claim := func(p store.CreateSessionParams) store.Allocation {
		a, err := st.ClaimCreate(ctx, p.AllocationID, p.CreateReceipt)
		must(t, err)
		return a
	}
	record := func(a store.Allocation, o store.CreateOutcome) store.Allocation {
		a, err := st.RecordCreateOutcome(ctx, a.CreateAttempt(), o)
		must(t, err)
		return a
	}
	running := store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "ctr-1", BootstrapComplete: true}
	unbooted := store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "ctr-1"}
	other := store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "ctr-2", BootstrapComplete: true}
	absent := store.CreateOutcome{Kind: store.CreateAbsent}
	unknown := store.CreateOutcome{Kind: store.CreateUnknown}

	type refusal struct {
		name    string
		attempt store.CreateAttempt
		outcome store.CreateOutcome
		class   error
	}
	var cases []refusal
	add := func(name string, a store.Allocation, class error, outcomes ...store.CreateOutcome) {
		for _, o := range outcomes {
			cases = append(cases, refusal{name, a.CreateAttempt(), o, class})
		}
	}

	// Foreign and stale attempts.
	fresh := claim(newSession())
	foreign := claim(newSession())
	add("made-up receipt", store.Allocation{ID: fresh.ID, CreateReceipt: newUUID(t)}, errdefs.ErrFenced, running, absent, unknown)
	add("another allocation's receipt", store.Allocation{ID: fresh.ID, CreateReceipt: foreign.CreateReceipt}, errdefs.ErrFenced, running, absent, unknown)

	// The Environment's previous allocation: settled failure, released,
	// then a new allocation whose Create is claimed.
	pp := newSession()
	prev := record(claim(pp), absent)
	prev, err := st.ResolveCreateFailure(ctx, prev.ID, prev.Revision)
	must(t, err)
	prev = storetest.Release(t, st, prev)
	next, err := st.AllocatePending(ctx, store.PendingAllocationParams{
		EnvironmentID: pp.EnvironmentID, NodeID: node, AllocationID: newUUID(t), DeviceID: newUUID(t),
		CredentialDigest: hash(randomBytes(t, 32)), CredentialCiphertext: randomBytes(t, 48),
		CredentialNonce: randomBytes(t, 12), CreateReceipt: newUUID(t),
	})
	must(t, err)
	next, err = st.ClaimCreate(ctx, next.ID, next.CreateReceipt)
	must(t, err)
	add("the previous allocation's receipt", store.Allocation{ID: next.ID, CreateReceipt: prev.CreateReceipt}, errdefs.ErrFenced, running, absent, unknown)
	add("a released allocation", prev, errdefs.ErrFailedPrecondition, running, unbooted, absent, unknown)
	ran := newSession()
	done := record(claim(ran), running)
	_, err = st.RequestSessionDeletion(ctx, ran.SessionID)
	must(t, err)
	done, err = st.GetAllocation(ctx, done.ID)
	must(t, err)
	done = storetest.Release(t, st, done)
	add("a released allocation that ran", done, errdefs.ErrFailedPrecondition, running, unbooted, absent, unknown)

	// Never claimed: Create was never sent (also when a deletion spent the
	// receipt first).
	unclaimed := newSession()
	ua, err := st.GetAllocation(ctx, unclaimed.AllocationID)
	must(t, err)
	add("never claimed", ua, errdefs.ErrFailedPrecondition, running, absent, unknown)
	early := newSession()
	ea, err := st.RequestCleanup(ctx, early.AllocationID)
	must(t, err)
	add("receipt spent by a deletion", ea, errdefs.ErrFailedPrecondition, running, absent, unknown)

	// Contradictions, before and during cleanup.
	for _, cleanup := range []bool{false, true} {
		prep := func(a store.Allocation) store.Allocation {
			if cleanup {
				a, err := st.RequestCleanup(ctx, a.ID)
				must(t, err)
				return a
			}
			return a
		}
		suffix := map[bool]string{false: "", true: " during cleanup"}[cleanup]
		seen := prep(record(claim(newSession()), unbooted))
		add("absence after a resource was seen"+suffix, seen, errdefs.ErrFailedPrecondition, absent)
		add("another provider id"+suffix, seen, errdefs.ErrFailedPrecondition, other)
		settled := prep(record(claim(newSession()), running))
		add("unknown after settlement"+suffix, settled, errdefs.ErrFailedPrecondition, unknown)
		add("absence after settlement"+suffix, settled, errdefs.ErrFailedPrecondition, absent)
		add("another provider id after settlement"+suffix, settled, errdefs.ErrFailedPrecondition, other)
		gone := prep(record(claim(newSession()), absent))
		add("running after an absence receipt"+suffix, gone, errdefs.ErrFailedPrecondition, running, unbooted)
		add("unknown after an absence receipt"+suffix, gone, errdefs.ErrFailedPrecondition, unknown)
	}
	add("unknown after a running resource", record(claim(newSession()), unbooted), errdefs.ErrFailedPrecondition, unknown)

	for _, c := range cases {
		before, err := st.GetAllocation(ctx, c.attempt.AllocationID)
		must(t, err)
		plBefore, err := st.GetPlacement(ctx, before.EnvironmentID)
		must(t, err)
		_, err = st.RecordCreateOutcome(ctx, c.attempt, c.outcome)
		if !errors.Is(err, c.class) {
			t.Errorf("%s (kind %d): %v, want %v", c.name, c.outcome.Kind, err, c.class)
			continue
		}
		after, err := st.GetAllocation(ctx, c.attempt.AllocationID)
		must(t, err)
		plAfter, err := st.GetPlacement(ctx, before.EnvironmentID)
		must(t, err)
		if !reflect.DeepEqual(before, after) || !reflect.DeepEqual(plBefore, plAfter) {
			t.Errorf("%s (kind %d): the refused call changed\n%+v\n%+v\nto\n%+v\n%+v", c.name, c.outcome.Kind, before, plBefore, after, plAfter)
		}
	}
}

// TestAbandonedCreateIsCleanedUpAndReallocated: an unknown Create is
// abandoned only once it was dispatched at least the given time ago by the
// database clock and is still unknown; abandonment revokes the device and
// requests cleanup, the allocation is released only once cleanup settled
// the attempt, and the active Session's Environment then stays pending
// with its reservation for a new allocation. Abandoned attempts count
// towards MaxCreateAttempts: the last one records the Environment failed.
func TestAbandonedCreateIsCleanedUpAndReallocated(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	p, b := newSession(t, ctx, st)
	env := b.Environment.ID

	_, _, err := st.AbandonCreate(ctx, b.Allocation.ID, b.Allocation.Revision, time.Millisecond)
	wantClass(t, err, errdefs.ErrInvalid)
	// Never claimed: nothing to abandon.
	a, ok, err := st.AbandonCreate(ctx, b.Allocation.ID, b.Allocation.Revision, time.Second)
	must(t, err)
	if ok || a.State != store.AllocationAllocated {
		t.Fatalf("abandoned an unclaimed allocation: %v %+v", ok, a)
	}

	// abandon claims a, records the outcome unknown and abandons it once
	// it is old enough by the database clock, then settles and releases it.
	abandon := func(a store.Allocation) store.Allocation {
		t.Helper()
		a, err := st.ClaimCreate(ctx, a.ID, a.CreateReceipt)
		must(t, err)
		a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateUnknown})
		must(t, err)
		// Too young for an hour's wait.
		got, ok, err := st.AbandonCreate(ctx, a.ID, a.Revision, time.Hour)
		must(t, err)
		if ok || got.State != store.AllocationCreateUnknown || got.Revision != a.Revision {
			t.Fatalf("abandoned a young Create: %v %+v", ok, got)
		}
		time.Sleep(1100 * time.Millisecond)
		// A stale revision abandons nothing.
		if _, ok, err := st.AbandonCreate(ctx, a.ID, a.Revision-1, time.Second); err != nil || ok {
			t.Fatalf("stale revision: %v %v", ok, err)
		}
		got, ok, err = st.AbandonCreate(ctx, a.ID, a.Revision, time.Second)
		must(t, err)
		if !ok || got.State != store.AllocationCleanupRequested || got.DeviceRevokedAt == nil || got.CreateAbandonedAt == nil ||
			got.CreationSettled() {
			t.Fatalf("after abandonment: %v %+v", ok, got)
		}
		// Abandoning is no settlement: not released before the cleanup's
		// Kill settled the attempt.
		got, err = st.RecordCleanup(ctx, got.ID, got.Revision, true)
		must(t, err)
		_, err = st.Release(ctx, got.ID)
		wantClass(t, err, errdefs.ErrFailedPrecondition)
		got, err = st.RecordCreateOutcome(ctx, got.CreateAttempt(), store.CreateOutcome{Kind: store.CreateAbsent})
		must(t, err)
		got, err = st.Release(ctx, got.ID)
		must(t, err)
		if got.State != store.AllocationReleased {
			t.Fatalf("after release: %+v", got)
		}
		return got
	}
	pendingParams := store.PendingAllocationParams{
		EnvironmentID: env, NodeID: node,
		CredentialDigest: hash(randomBytes(t, 32)), CredentialCiphertext: randomBytes(t, 48),
		CredentialNonce: randomBytes(t, 12),
	}
	reallocate := func() store.Allocation {
		t.Helper()
		got, err := st.GetSession(ctx, p.SessionID)
		must(t, err)
		if got.Environment.State != store.EnvironmentPending || got.Allocation.ID != uuid.Nil ||
			got.Placement.State != store.PlacementReserved || got.Placement.NodeID != node {
			t.Fatalf("after an abandoned attempt: %+v", got)
		}
		pp := pendingParams
		pp.AllocationID, pp.DeviceID, pp.CreateReceipt = newUUID(t), newUUID(t), newUUID(t)
		a, err := st.AllocatePending(ctx, pp)
		must(t, err)
		return a
	}

	abandon(b.Allocation)
	abandon(reallocate())
	abandon(reallocate())
	got, err := st.GetSession(ctx, p.SessionID)
	must(t, err)
	if got.Environment.State != store.EnvironmentFailed || got.Environment.FailureCode != store.FailureCreateFailed ||
		got.Placement.State != store.PlacementReleased {
		t.Fatalf("after %d abandoned attempts: %+v", store.MaxCreateAttempts, got)
	}
	if holds, err := st.NodeHolds(ctx, node); err != nil || holds {
		t.Fatalf("node holds %v (%v) after the Environment failed", holds, err)
	}
}

// TestRunningCreateIsNeverAbandoned: a Create observed running, or one
// whose Session's deletion already requested cleanup, is not abandoned
// however old it is.
func TestRunningCreateIsNeverAbandoned(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	_, b := newSession(t, ctx, st)
	a, err := st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{
		Kind: store.CreateRunning, ProviderID: "c1", BootstrapComplete: true})
	must(t, err)
	time.Sleep(1100 * time.Millisecond)
	got, ok, err := st.AbandonCreate(ctx, a.ID, a.Revision, time.Second)
	must(t, err)
	if ok || got.State != store.AllocationRunning || got.DeviceRevokedAt != nil {
		t.Fatalf("abandoned running compute: %v %+v", ok, got)
	}

	_, b = newSession(t, ctx, st)
	a, err = st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	a, err = st.RequestCleanup(ctx, a.ID)
	must(t, err)
	time.Sleep(1100 * time.Millisecond)
	got, ok, err = st.AbandonCreate(ctx, a.ID, a.Revision, time.Second)
	must(t, err)
	if ok || got.State != store.AllocationCleanupRequested || got.CreateAbandonedAt != nil {
		t.Fatalf("abandoned a Create in cleanup: %v %+v", ok, got)
	}
}
