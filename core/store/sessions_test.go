package store_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// enabledNode creates a node and enables it.
func enabledNode(t *testing.T, ctx context.Context, st nodeWriter) uuid.UUID {
	t.Helper()
	n := createNode(t, ctx, st, newUUID(t))
	_, err := st.SetNodeState(ctx, n.ID, store.NodeEnrolled, store.NodeEnabled, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	return n.ID
}

// ownedStore is newStore acting for an owner epoch that holds the
// execution lease (storetest.Owner), for lifecycle writes.
func ownedStore(t *testing.T) (*storetest.Owned, context.Context) {
	t.Helper()
	st, ctx := newStore(t)
	return storetest.Owner(t, st), ctx
}

// presentNode creates and enables a node and records a fresh, ready
// presence with ample capacity for generation 1 under st's owner epoch.
func presentNode(t *testing.T, ctx context.Context, st *storetest.Owned) uuid.UUID {
	t.Helper()
	id := enabledNode(t, ctx, st)
	storetest.Present(t, st, id, 1)
	return id
}

// sessionParams returns CreateSession input with fresh ids in the default
// project (migration 0022), generation 1, zero resources and maxActive.
func sessionParams(t testing.TB, maxActive int) store.CreateSessionParams {
	return store.CreateSessionParams{
		RequestID:        newUUID(t),
		ProjectID:        store.DefaultProjectID,
		TenantID:         store.DefaultTenantID,
		DisplayName:      "session",
		SessionID:        newUUID(t),
		EnvironmentID:    newUUID(t),
		AllocationID:     newUUID(t),
		DeviceID:         newUUID(t),
		CredentialDigest: hash(randomBytes(t, 32)),
		CreateReceipt:    newUUID(t),
		Generation:       1,

		CredentialCiphertext: randomBytes(t, 48),
		CredentialNonce:      randomBytes(t, 12),
		MaxActive:            maxActive,
	}
}

func TestCreateSessionCommitsEverythingAndIsIdempotent(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	p, b := newSession(t, ctx, st)
	a := b.Allocation
	switch {
	case !b.Created, b.Session.ID != p.SessionID, b.Session.State != store.SessionActive,
		b.Environment.ID != p.EnvironmentID, b.Environment.SessionID != p.SessionID,
		b.Environment.State != store.EnvironmentPending,
		b.Placement.NodeID != node, b.Placement.State != store.PlacementReserved, b.Placement.Generation != 1,
		a.ID != p.AllocationID, a.EnvironmentID != p.EnvironmentID, a.TenantID != p.TenantID,
		a.NodeID != node, a.DeviceID != p.DeviceID, !bytes.Equal(a.CredentialDigest, p.CredentialDigest),
		a.CreateReceipt != p.CreateReceipt, a.State != store.AllocationAllocated, a.Revision != 1,
		a.CreateDispatchedAt != nil:
		t.Fatalf("bundle = %+v", b)
	}
	if err := a.Reference().Validate(); err != nil {
		t.Fatal(err)
	}

	// A retry with the same request id and fresh everything else: the
	// first rows, nothing new.
	retry := sessionParams(t, 5)
	retry.RequestID = p.RequestID
	again, err := st.CreateSession(ctx, retry)
	must(t, err)
	if again.Created || again.Session.ID != p.SessionID || again.Allocation.ID != p.AllocationID ||
		again.Allocation.CreateReceipt != p.CreateReceipt || !bytes.Equal(again.Allocation.CredentialDigest, p.CredentialDigest) ||
		again.Placement.NodeID != node {
		t.Fatalf("retry = %+v, want the first bundle", again)
	}
	for _, id := range []uuid.UUID{retry.SessionID} {
		_, err := st.GetSession(ctx, id)
		wantClass(t, err, errdefs.ErrNotFound)
	}
	_, err = st.GetAllocation(ctx, retry.AllocationID)
	wantClass(t, err, errdefs.ErrNotFound)
	held, err := st.NodeHeld(ctx, node)
	must(t, err)
	if held != 1 {
		t.Errorf("node holds %d, want 1", held)
	}

	// The same request id for another tenant is another request.
	other := retry
	other.TenantID = newUUID(t)
	_, err = st.CreateSession(ctx, other)
	wantClass(t, err, errdefs.ErrExists)

	// A retry keeps its node even when it is no longer eligible (retired,
	// and not present any more).
	_, err = st.SetNodeState(ctx, node, store.NodeEnabled, store.NodeRetired, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	storetest.Absent(t, st, node)
	again, err = st.CreateSession(ctx, retry)
	must(t, err)
	if again.Created || again.Placement.NodeID != node {
		t.Fatalf("retry after retirement = %+v", again)
	}

	got, err := st.GetSession(ctx, p.SessionID)
	must(t, err)
	if got.Allocation.ID != p.AllocationID || got.Placement.NodeID != node {
		t.Fatalf("GetSession = %+v", got)
	}
}

func TestCreateSessionRejectsBadInput(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	for name, mutate := range map[string]func(p *store.CreateSessionParams){
		"nil request":       func(p *store.CreateSessionParams) { p.RequestID = uuid.Nil },
		"allocation is env": func(p *store.CreateSessionParams) { p.AllocationID = p.EnvironmentID },
		"short digest":      func(p *store.CreateSessionParams) { p.CredentialDigest = p.CredentialDigest[:16] },
		"zero generation":   func(p *store.CreateSessionParams) { p.Generation = 0 },
		"no sealed credential": func(p *store.CreateSessionParams) {
			p.CredentialCiphertext, p.CredentialNonce = nil, nil
		},
		"short nonce":     func(p *store.CreateSessionParams) { p.CredentialNonce = p.CredentialNonce[:8] },
		"zero max_active": func(p *store.CreateSessionParams) { p.MaxActive = 0 },
		"control in name": func(p *store.CreateSessionParams) { p.DisplayName = "a\nb" },
	} {
		p := sessionParams(t, 5)
		mutate(&p)
		_, err := st.CreateSession(ctx, p)
		if !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", name, err)
		}
	}

	first := sessionParams(t, 5)
	_, err := st.CreateSession(ctx, first)
	must(t, err)
	dup := sessionParams(t, 5)
	dup.DeviceID = first.DeviceID
	_, err = st.CreateSession(ctx, dup)
	wantClass(t, err, errdefs.ErrExists)

	// An enrolled (not enabled) node is never chosen, present or not.
	storetest.Absent(t, st, node)
	enrolled := createNode(t, ctx, st, newUUID(t)).ID
	storetest.Present(t, st, enrolled, 1)
	_, err = st.CreateSession(ctx, sessionParams(t, 5))
	wantClass(t, err, store.ErrNoCapacity)
	wantClass(t, err, errdefs.ErrFailedPrecondition)
}

func TestCreateSessionNeverOverPlacesUnderConcurrency(t *testing.T) {
	st, ctx := ownedStore(t)
	nodes := []uuid.UUID{presentNode(t, ctx, st), presentNode(t, ctx, st)}
	const maxActive, callers = 5, 40
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		perNode   = map[uuid.UUID]int{}
		succeeded int
		errs      []error
	)
	start := make(chan struct{})
	for range callers {
		p := sessionParams(t, maxActive)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			b, err := st.CreateSession(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			succeeded++
			perNode[b.Placement.NodeID]++
		}()
	}
	close(start)
	wg.Wait()
	if succeeded != len(nodes)*maxActive {
		t.Errorf("%d creations succeeded, want %d", succeeded, len(nodes)*maxActive)
	}
	for _, err := range errs {
		if !errors.Is(err, store.ErrNoCapacity) {
			t.Errorf("failed creation: %v, want ErrNoCapacity", err)
		}
	}
	for _, n := range nodes {
		held, err := st.NodeHeld(ctx, n)
		must(t, err)
		if perNode[n] != maxActive || held != maxActive {
			t.Errorf("node %s: placed %d, holds %d, want %d", n, perNode[n], held, maxActive)
		}
	}
}

func TestCreateSessionConcurrentRetriesCreateOnce(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	base := sessionParams(t, 5)
	const callers = 8
	results := make([]store.SessionBundle, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		p := sessionParams(t, 5)
		p.RequestID = base.RequestID
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = st.CreateSession(ctx, p)
		}()
	}
	wg.Wait()
	created := 0
	for i := range callers {
		must(t, errs[i])
		if results[i].Created {
			created++
		}
		if results[i].Session.ID != results[0].Session.ID || results[i].Allocation.ID != results[0].Allocation.ID {
			t.Fatalf("caller %d got session %s allocation %s, caller 0 %s %s", i,
				results[i].Session.ID, results[i].Allocation.ID, results[0].Session.ID, results[0].Allocation.ID)
		}
	}
	held, err := st.NodeHeld(ctx, node)
	must(t, err)
	if created != 1 || held != 1 {
		t.Errorf("created %d times, node holds %d; want 1 and 1", created, held)
	}
}

func TestRequestSessionDeletionSpendsTheCreateReceipt(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	p, _ := newSession(t, ctx, st)
	b, err := st.RequestSessionDeletion(ctx, p.SessionID)
	must(t, err)
	if b.Session.State != store.SessionDeleteRequested || b.Session.DeleteRequestedAt == nil ||
		b.Allocation.State != store.AllocationCleanupRequested {
		t.Fatalf("after deletion request: %+v", b)
	}
	_, err = st.ClaimCreate(ctx, p.AllocationID, p.CreateReceipt)
	wantClass(t, err, errdefs.ErrFenced)
	// Again: nothing changes.
	again, err := st.RequestSessionDeletion(ctx, p.SessionID)
	must(t, err)
	if !again.Session.DeleteRequestedAt.Equal(*b.Session.DeleteRequestedAt) || again.Allocation.Revision != b.Allocation.Revision {
		t.Fatalf("second deletion request changed %+v to %+v", b, again)
	}
	// Never sent, so creation is settled: cleanup confirmed releases it.
	a, err := st.RecordCleanup(ctx, p.AllocationID, again.Allocation.Revision, true)
	must(t, err)
	a, err = st.Release(ctx, a.ID)
	must(t, err)
	if a.State != store.AllocationReleased || a.ReleasedAt == nil {
		t.Fatalf("released = %+v", a)
	}
	holds, err := st.NodeHolds(ctx, node)
	must(t, err)
	if holds {
		t.Error("node still holds after release")
	}
	_, err = st.RequestSessionDeletion(ctx, newUUID(t))
	wantClass(t, err, errdefs.ErrNotFound)
}

func TestCreateSessionKeepsTheOriginalSealedCredential(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	p, b := newSession(t, ctx, st)
	got, err := st.GetAllocationCredential(ctx, b.Allocation.ID)
	must(t, err)
	if !bytes.Equal(got.Ciphertext, p.CredentialCiphertext) || !bytes.Equal(got.Nonce, p.CredentialNonce) {
		t.Fatal("sealed credential not kept")
	}

	// A retry with another sealed credential keeps the original one.
	retry := sessionParams(t, 5)
	retry.RequestID = p.RequestID
	again, err := st.CreateSession(ctx, retry)
	must(t, err)
	if again.Created || again.Allocation.ID != b.Allocation.ID {
		t.Fatalf("retry created %+v", again)
	}
	got, err = st.GetAllocationCredential(ctx, b.Allocation.ID)
	must(t, err)
	if !bytes.Equal(got.Ciphertext, p.CredentialCiphertext) || !bytes.Equal(got.Nonce, p.CredentialNonce) {
		t.Fatal("a retry replaced the sealed credential")
	}

	_, err = st.GetAllocationCredential(ctx, newUUID(t))
	wantClass(t, err, errdefs.ErrNotFound)
}

// TestCreateSessionHonoursEachNodesCapacity: a node whose reported capacity
// (durable presence) fits fewer Environments than max_active takes no more
// than that; a node with ample capacity takes up to max_active; each of
// CPU, memory and free disk bounds on its own.
func TestCreateSessionHonoursEachNodesCapacity(t *testing.T) {
	st, ctx := ownedStore(t)
	res := sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30}
	report := func(node uuid.UUID, cpu, mem, disk int64) {
		must(t, st.RecordNodePresence(ctx, store.NodePresence{
			NodeID: node, ConnectionID: newUUID(t), Generation: 1, Ready: true,
			CPUMillis: cpu, MemoryBytes: mem, DiskFreeBytes: disk,
		}))
	}
	small, big := enabledNode(t, ctx, st), enabledNode(t, ctx, st)
	report(small, 1999, storetest.Ample, storetest.Ample) // fits one
	report(big, storetest.Ample, storetest.Ample, storetest.Ample)
	held := map[uuid.UUID]int{}
	for range 7 {
		p := sessionParams(t, 5)
		p.Resources = res
		b, err := st.CreateSession(ctx, p)
		if err != nil {
			wantClass(t, err, store.ErrNoCapacity)
			break
		}
		held[b.Placement.NodeID]++
	}
	if held[small] != 1 || held[big] != 5 {
		t.Fatalf("placed %v, want 1 on the small node and 5 on the big one", held)
	}
	// Memory or free disk that fits nothing takes nothing; neither does a
	// zero-capacity report, while a zero need bounds nothing.
	for name, c := range map[string][3]int64{
		"memory": {storetest.Ample, 1<<30 - 1, storetest.Ample},
		"disk":   {storetest.Ample, storetest.Ample, 4<<30 - 1},
		"zero":   {0, 0, 0},
	} {
		storetest.Absent(t, st, small)
		storetest.Absent(t, st, big)
		n := enabledNode(t, ctx, st)
		report(n, c[0], c[1], c[2])
		p := sessionParams(t, 5)
		p.Resources = res
		_, err := st.CreateSession(ctx, p)
		if !errors.Is(err, store.ErrNoCapacity) {
			t.Errorf("%s: %v, want ErrNoCapacity", name, err)
		}
		if name == "zero" {
			b, err := st.CreateSession(ctx, sessionParams(t, 5))
			if err != nil || b.Placement.NodeID != n {
				t.Errorf("zero need on a zero report: %+v, %v", b.Placement, err)
			}
		}
		storetest.Absent(t, st, n)
	}
}

// TestCountsOfLiveSessionsAndAllocations: the metrics' counts see every
// Session whose deletion has not completed, grouped by the facts its
// state comes from, and every unreleased allocation by state; a deleted
// Session and a released allocation are history and not counted.
func TestCountsOfLiveSessionsAndAllocations(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	_, _ = newSession(t, ctx, st) // allocated, never sent
	_, _ = storetest.RunningSession(t, st)
	deleting, _ := storetest.RunningSession(t, st)
	_, err := st.RequestSessionDeletion(ctx, deleting.Session.ID)
	must(t, err)
	p, _ := newSession(t, ctx, st) // deleted: its allocation released
	b, err := st.RequestSessionDeletion(ctx, p.SessionID)
	must(t, err)
	storetest.Release(t, st, b.Allocation)

	counts, err := st.CountLiveSessions(ctx)
	must(t, err)
	type key struct {
		s store.SessionState
		e store.EnvironmentState
		a store.AllocationState
		c bool
	}
	got := map[key]int64{}
	for _, c := range counts {
		got[key{c.Session, c.Environment, c.Allocation, c.CreateSettled}] += c.Sessions
	}
	want := map[key]int64{
		{store.SessionActive, store.EnvironmentPending, store.AllocationAllocated, false}:                1,
		{store.SessionActive, store.EnvironmentPending, store.AllocationRunning, true}:                   1,
		{store.SessionDeleteRequested, store.EnvironmentPending, store.AllocationCleanupRequested, true}: 1,
	}
	if len(got) != len(want) {
		t.Fatalf("live Session counts %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("live Session count %+v = %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	allocs, err := st.CountUnreleasedAllocations(ctx)
	must(t, err)
	if len(allocs) != 3 || allocs[store.AllocationAllocated] != 1 || allocs[store.AllocationRunning] != 1 ||
		allocs[store.AllocationCleanupRequested] != 1 {
		t.Fatalf("unreleased allocations by state: %v", allocs)
	}
}
