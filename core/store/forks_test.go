package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// forkParams is a CreateFork of source b into n children, at most
// maxActive per node, at least minCount placed.
func forkParams(t testing.TB, b store.SessionBundle, n, minCount, maxActive int) store.ForkSessionParams {
	p := store.ForkSessionParams{
		ForkID: newUUID(t), CaptureOp: newUUID(t), RequestID: newUUID(t),
		SourceSessionID: b.Session.ID, ProjectID: b.Session.ProjectID, TenantID: b.Session.TenantID,
		MinCount: minCount, Generation: b.Allocation.Generation, MaxActive: maxActive,
	}
	for range n {
		p.Children = append(p.Children, store.ForkChild{
			SessionID: newUUID(t), EnvironmentID: newUUID(t), AllocationID: newUUID(t), DeviceID: newUUID(t),
			CreateReceipt: newUUID(t), RequestID: newUUID(t), DisplayName: "child",
			CredentialDigest: hash(randomBytes(t, 32)), CredentialCiphertext: randomBytes(t, 48), CredentialNonce: randomBytes(t, 12),
		})
	}
	return p
}

// pendingIDs is the set of allocations node's pending scan would create.
func pendingIDs(t *testing.T, st *storetest.Owned, node uuid.UUID) map[uuid.UUID]bool {
	t.Helper()
	page, err := st.ListPendingForNode(t.Context(), node, uuid.Nil, store.NodePageSize)
	must(t, err)
	out := map[uuid.UUID]bool{}
	for _, p := range page {
		out[p.AllocationID] = true
	}
	return out
}

// createChildren claims and records each child's Create as running.
func createChildren(t *testing.T, st *storetest.Owned, children []store.SessionBundle) {
	t.Helper()
	for _, c := range children {
		a, err := st.ClaimCreate(t.Context(), c.Allocation.ID, c.Allocation.CreateReceipt)
		must(t, err)
		_, err = st.RecordCreateOutcome(t.Context(), a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-" + a.ID.String(), BootstrapComplete: true})
		must(t, err)
	}
}

// TestForkOfARunningSession: a fork commits its children on the source's
// node with the fork on their allocations; their Creates wait for the
// capture (not pending) while the fork's capture is the node's fork work
// and the source is not idle; the capture is claimed once and recorded,
// after which the children are pending; once every child's Create is
// settled the fork settles and its snapshot is owed by the source. A
// retry returns the same fork and children and writes nothing.
func TestForkOfARunningSession(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	node := s.b.Allocation.NodeID
	if i, _ := st.SessionIdleSince(ctx, s.b.Session.ID); !i.Idle {
		t.Fatal("the source is not idle before the fork")
	}

	p := forkParams(t, s.b, 3, 1, 8)
	res, err := st.CreateFork(ctx, p)
	must(t, err)
	f := res.Fork
	if !res.Created || f.State != store.ForkCapturing || f.Borrowed || f.Requested != 3 || f.Placed != 3 || f.UnplacedReason != "" ||
		f.NodeID != node || f.SourceAllocationID != s.b.Allocation.ID || f.CaptureOp == nil || *f.CaptureOp != p.CaptureOp {
		t.Fatalf("fork %+v", f)
	}
	if len(res.Children) != 3 {
		t.Fatalf("%d children", len(res.Children))
	}
	for i, c := range res.Children {
		if c.Session.ID != p.Children[i].SessionID || c.Placement.NodeID != node || c.Allocation.ForkID == nil || *c.Allocation.ForkID != f.ID {
			t.Fatalf("child %d: %+v", i, c)
		}
	}
	if len(pendingIDs(t, st, node)) != 0 {
		t.Fatal("a child is pending before the capture")
	}
	wantNodeWork(t, st, node, store.NodeWork{Forks: true}, "capturing")
	if i, _ := st.SessionIdleSince(ctx, s.b.Session.ID); i.Idle {
		t.Fatal("the source is idle while its fork is capturing")
	}
	_, err = st.ArmSuspension(ctx, s.b.Allocation.ID, s.b.Allocation.Revision, uuid.New())
	wantClass(t, err, errdefs.ErrFenced)

	again, err := st.CreateFork(ctx, p)
	must(t, err)
	if again.Created || again.Fork.ID != f.ID || len(again.Children) != 3 || again.Children[2].Session.ID != res.Children[2].Session.ID {
		t.Fatalf("retry: %+v", again)
	}

	_, err = st.RecordForkCaptured(ctx, f.ID, p.CaptureOp, sandbox.SnapshotIdentity{ID: "s", Provenance: "p"})
	wantClass(t, err, errdefs.ErrFenced) // not claimed
	claimed, err := st.ClaimForkCapture(ctx, f.ID, p.CaptureOp)
	must(t, err)
	if claimed.CaptureClaimedAt == nil {
		t.Fatal("claim not recorded")
	}
	_, err = st.ClaimForkCapture(ctx, f.ID, p.CaptureOp)
	wantClass(t, err, errdefs.ErrFenced)
	snap := sandbox.SnapshotIdentity{ID: "snap-fork", Provenance: "docker-volumes;copy=helper-cp-a"}
	ready, err := st.RecordForkCaptured(ctx, f.ID, p.CaptureOp, snap)
	must(t, err)
	if ready.State != store.ForkReady || ready.Snapshot != snap || ready.CapturedAt == nil {
		t.Fatalf("captured: %+v", ready)
	}
	if got := pendingIDs(t, st, node); len(got) != 3 {
		t.Fatalf("pending after the capture: %v", got)
	}
	wantNodeWork(t, st, node, store.NodeWork{Pending: true, SuspensionCandidates: true}, "ready, children pending, the source idle again")
	if i, _ := st.SessionIdleSince(ctx, s.b.Session.ID); !i.Idle {
		t.Fatal("the source is not idle once captured")
	}

	_, err = st.FinishFork(ctx, f.ID)
	wantClass(t, err, errdefs.ErrFenced) // children not created
	createChildren(t, st, res.Children)
	wantNodeWork(t, st, node, store.NodeWork{Forks: true, SuspensionCandidates: true}, "children created")
	done, err := st.FinishFork(ctx, f.ID)
	must(t, err)
	if done.State != store.ForkSettled || done.EndedAt == nil {
		t.Fatalf("settled: %+v", done)
	}
	left, err := st.ListOwedLeftovers(ctx, s.b.Allocation)
	must(t, err)
	if len(left) != 1 || left[0].Snapshot == nil || *left[0].Snapshot != snap {
		t.Fatalf("the source's leftovers after the fork: %+v", left)
	}
	wantNodeWork(t, st, node, store.NodeWork{Leftovers: true, SuspensionCandidates: true}, "settled, the snapshot owed")
}

// TestForkPlacesWhatFitsAndSaysWhy: the node's bound stops the placement:
// with min_count at most what fits, the fork places that many and records
// no_ready_node_with_capacity; with min_count above it nothing is written
// and the refusal is the placement's own. A project at its active limit
// stops it with project_active_limit. A source being suspended is
// fork_source_busy.
func TestForkPlacesWhatFitsAndSaysWhy(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	// The node holds the source: 3 more fit under max_active 4.
	_, err := st.CreateFork(ctx, forkParams(t, s.b, 5, 4, 4))
	wantClass(t, err, store.ErrNoCapacity)
	if got := pendingIDs(t, st, s.b.Allocation.NodeID); len(got) != 0 {
		t.Fatalf("a refused fork wrote children: %v", got)
	}
	res, err := st.CreateFork(ctx, forkParams(t, s.b, 5, 3, 4))
	must(t, err)
	if res.Fork.Placed != 3 || len(res.Children) != 3 || res.Fork.UnplacedReason != "no_ready_node_with_capacity" {
		t.Fatalf("partial fork: placed %d (%d children), reason %q", res.Fork.Placed, len(res.Children), res.Fork.UnplacedReason)
	}

	busy := idleSession(t, st, epoch)
	limit := int32(6) // held: the two sources and the three children
	_, err = st.UpdateProjectFields(ctx, store.DefaultTenantID, store.DefaultProjectID, store.AnyRevision,
		store.ProjectChanges{SetMaxActiveSessions: true, MaxActiveSessions: &limit})
	must(t, err)
	res, err = st.CreateFork(ctx, forkParams(t, s.b, 3, 1, 16))
	must(t, err)
	if res.Fork.Placed != 1 || res.Fork.UnplacedReason != "project_active_limit" {
		t.Fatalf("fork at the project's limit: placed %d, reason %q", res.Fork.Placed, res.Fork.UnplacedReason)
	}

	_, err = st.ArmSuspension(ctx, busy.b.Allocation.ID, busy.b.Allocation.Revision, uuid.New())
	must(t, err)
	_, err = st.CreateFork(ctx, forkParams(t, busy.b, 1, 1, 64))
	wantClass(t, err, store.ErrForkSourceBusy)
}

// TestForkOfASuspendedSessionBorrowsItsSnapshot: a suspended source lends
// its suspension snapshot (ready at once, nothing to capture, the
// children pending); after the source is woken, the consumed snapshot is
// a leftover its deletion must wait for: not listed while the fork is
// open, listed once it settles.
func TestForkOfASuspendedSessionBorrowsItsSnapshot(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	suspended, _ := suspend(t, st, s)
	s.b.Allocation = suspended
	res, err := st.CreateFork(ctx, forkParams(t, s.b, 2, 2, 8))
	must(t, err)
	f := res.Fork
	if f.State != store.ForkReady || !f.Borrowed || f.CaptureOp != nil || f.Snapshot != suspended.Suspension.Snapshot {
		t.Fatalf("fork of a suspended source: %+v", f)
	}
	if got := pendingIDs(t, st, suspended.NodeID); len(got) != 2 {
		t.Fatalf("pending children: %v", got)
	}
	_, err = st.ClaimForkCapture(ctx, f.ID, newUUID(t))
	wantClass(t, err, errdefs.ErrFenced)

	// The source wakes: its snapshot is consumed, and owed, but held.
	rop := uuid.New()
	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "compute-g2"}
	restoring, err := st.ArmRestore(ctx, suspended.ID, suspended.Revision, rop, target)
	must(t, err)
	_, err = st.ClaimRestore(ctx, restoring.ID, rop)
	must(t, err)
	restored, err := st.RecordRestored(ctx, restoring.ID, rop, "native-g2")
	must(t, err)
	if left, err := st.ListOwedLeftovers(ctx, restored); err != nil || len(left) != 0 {
		t.Fatalf("a borrowed snapshot listed for deletion while its fork is open: %+v %v", left, err)
	}
	createChildren(t, st, res.Children)
	_, err = st.FinishFork(ctx, f.ID)
	must(t, err)
	left, err := st.ListOwedLeftovers(ctx, restored)
	must(t, err)
	if len(left) != 1 || left[0].Snapshot == nil || *left[0].Snapshot != suspended.Suspension.Snapshot {
		t.Fatalf("the suspension snapshot after the fork settled: %+v", left)
	}
}

// TestFailedForkEndsItsUncreatedChildren: a capture that fails ends the
// fork with its code and ends each child not yet created FAILED with the
// same code (its receipt spent, so no Create is ever sent); a source
// deleted before the capture's claim fails the fork fork_source_ended and
// the claim is refused.
func TestFailedForkEndsItsUncreatedChildren(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 16, 4)
	s := idleSession(t, st, epoch)
	p := forkParams(t, s.b, 2, 1, 16)
	res, err := st.CreateFork(ctx, p)
	must(t, err)
	_, err = st.ClaimForkCapture(ctx, res.Fork.ID, p.CaptureOp)
	must(t, err)
	failed, terms, err := st.FailFork(ctx, res.Fork.ID, store.ForkFailureCapture)
	must(t, err)
	if failed.State != store.ForkFailed || failed.FailureCode != store.ForkFailureCapture || len(terms) != 2 {
		t.Fatalf("failed fork %+v, %d terminations", failed, len(terms))
	}
	for _, c := range res.Children {
		b, err := st.GetSession(ctx, c.Session.ID)
		must(t, err)
		if b.Environment.State != store.EnvironmentFailed || b.Environment.FailureCode != store.ForkFailureCapture {
			t.Fatalf("child after the failed fork: %+v", b.Environment)
		}
		_, err = st.ClaimCreate(ctx, c.Allocation.ID, c.Allocation.CreateReceipt)
		wantClass(t, err, errdefs.ErrFenced)
	}
	_, _, err = st.FailFork(ctx, res.Fork.ID, store.ForkFailureCapture)
	wantClass(t, err, errdefs.ErrFenced)

	p = forkParams(t, s.b, 1, 1, 16)
	res, err = st.CreateFork(ctx, p)
	must(t, err)
	_, err = st.RequestSessionDeletion(ctx, s.b.Session.ID)
	must(t, err)
	_, err = st.ClaimForkCapture(ctx, res.Fork.ID, p.CaptureOp)
	wantClass(t, err, errdefs.ErrFenced)
	f, err := st.GetFork(ctx, res.Fork.ID)
	must(t, err)
	if f.State != store.ForkFailed || f.FailureCode != store.ForkFailureSourceEnded {
		t.Fatalf("fork of a deleted source: %+v", f)
	}
}

// TestForkOf128ChildrenInOneTransaction places the bound's 128 children
// in one transaction and logs its time: the locks it holds (the project's
// load row and the node's) queue concurrent creations for that long.
func TestForkOf128ChildrenInOneTransaction(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 256, 4)
	s := idleSession(t, st, epoch)
	start := time.Now()
	res, err := st.CreateFork(ctx, forkParams(t, s.b, store.MaxForkChildren, store.MaxForkChildren, 256))
	took := time.Since(start)
	must(t, err)
	if res.Fork.Placed != store.MaxForkChildren || len(res.Children) != store.MaxForkChildren {
		t.Fatalf("placed %d", res.Fork.Placed)
	}
	t.Logf("CreateFork of %d children: %v", store.MaxForkChildren, took.Round(time.Millisecond))
	_, err = st.CreateFork(ctx, forkParams(t, s.b, store.MaxForkChildren+1, 1, 512))
	wantClass(t, err, errdefs.ErrInvalid)
}

// TestForkSpreadsChildrenAndSeedsOtherNodes: children spread over the
// nodes with room; a node other than the source's owes a seed, and its
// children are not pending until the seed is ready (after the capture,
// one claimed import, recorded); once the fork settles the seed is
// discard work. A seed whose imports keep failing fails after
// MaxSeedAttempts and ends its node's uncreated children FAILED
// fork_seed_failed.
func TestForkSpreadsChildrenAndSeedsOtherNodes(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 4)
	s := idleSession(t, st, epoch)
	source := s.b.Allocation.NodeID
	other := storetest.EnabledNode(t, st)
	storetest.Present(t, st, other, 1)

	p := forkParams(t, s.b, 4, 4, 8)
	res, err := st.CreateFork(ctx, p)
	must(t, err)
	perNode := map[uuid.UUID]int{}
	for _, c := range res.Children {
		perNode[c.Placement.NodeID]++
	}
	// The least held node first, each placement raising its count: both
	// nodes get children.
	if len(perNode) != 2 || perNode[source] == 0 || perNode[other] == 0 {
		t.Fatalf("children per node: %v (source %s, other %s)", perNode, source, other)
	}
	seed, err := st.GetForkSeed(ctx, res.Fork.ID, other)
	must(t, err)
	if seed.State != store.SeedOwed || seed.Operation == uuid.Nil {
		t.Fatalf("seed %+v", seed)
	}
	if _, err := st.GetForkSeed(ctx, res.Fork.ID, source); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a seed on the source's node: %v", err)
	}
	wantNodeWork(t, st, other, store.NodeWork{}, "the other node before the capture")
	_, err = st.ClaimForkSeed(ctx, res.Fork.ID, other)
	wantClass(t, err, errdefs.ErrFenced) // the fork is not ready

	_, err = st.ClaimForkCapture(ctx, res.Fork.ID, p.CaptureOp)
	must(t, err)
	_, err = st.RecordForkCaptured(ctx, res.Fork.ID, p.CaptureOp, sandbox.SnapshotIdentity{ID: "snap", Provenance: "p"})
	must(t, err)
	if got := pendingIDs(t, st, other); len(got) != 0 {
		t.Fatalf("children pending on the other node before its seed: %v", got)
	}
	if got := pendingIDs(t, st, source); len(got) != perNode[source] {
		t.Fatalf("pending on the source's node: %d, want %d", len(got), perNode[source])
	}
	wantNodeWork(t, st, other, store.NodeWork{Seeds: true}, "the other node owes its seed")
	claimed, err := st.ClaimForkSeed(ctx, res.Fork.ID, other)
	must(t, err)
	if claimed.State != store.SeedImporting || claimed.Attempts != 1 {
		t.Fatalf("claimed seed %+v", claimed)
	}
	seedSnap := sandbox.SnapshotIdentity{ID: "seed", Provenance: "copy=import"}
	ready, err := st.RecordForkSeedReady(ctx, res.Fork.ID, other, seedSnap)
	must(t, err)
	if ready.State != store.SeedReady || ready.Snapshot != seedSnap {
		t.Fatalf("ready seed %+v", ready)
	}
	if got := pendingIDs(t, st, other); len(got) != perNode[other] {
		t.Fatalf("pending on the other node after its seed: %d, want %d", len(got), perNode[other])
	}
	createChildren(t, st, res.Children)
	_, err = st.FinishFork(ctx, res.Fork.ID)
	must(t, err)
	work, err := st.ListSeedWorkForNode(ctx, other, uuid.Nil, store.NodePageSize)
	must(t, err)
	if len(work) != 1 || work[0].ForkState != store.ForkSettled || work[0].ViaAllocationID == uuid.Nil {
		t.Fatalf("seed work after the fork settled: %+v", work)
	}
	// The node's children deleted and released: the seed alone still
	// keeps the node from removal until it is discarded.
	for _, c := range res.Children {
		if c.Placement.NodeID != other {
			continue
		}
		_, term, err := st.DeleteSession(ctx, c.Session.ID)
		must(t, err)
		storetest.Release(t, st, term.Cleanup)
	}
	if holds, err := st.NodeHolds(ctx, other); err != nil || !holds {
		t.Fatalf("NodeHolds with only a seed left = %v, %v; want true", holds, err)
	}
	_, err = st.MarkForkSeedDiscarded(ctx, res.Fork.ID, other)
	must(t, err)
	if holds, err := st.NodeHolds(ctx, other); err != nil || holds {
		t.Fatalf("NodeHolds after the seed's discard = %v, %v; want false", holds, err)
	}
	wantNodeWork(t, st, other, store.NodeWork{}, "the seed discarded")

	// A seed whose imports keep failing.
	p = forkParams(t, s.b, 2, 1, 16)
	res, err = st.CreateFork(ctx, p)
	must(t, err)
	_, err = st.ClaimForkCapture(ctx, res.Fork.ID, p.CaptureOp)
	must(t, err)
	_, err = st.RecordForkCaptured(ctx, res.Fork.ID, p.CaptureOp, sandbox.SnapshotIdentity{ID: "snap2", Provenance: "p"})
	must(t, err)
	var onOther []store.SessionBundle
	for _, c := range res.Children {
		if c.Placement.NodeID == other {
			onOther = append(onOther, c)
		}
	}
	if len(onOther) == 0 {
		t.Fatal("no child on the other node")
	}
	for range store.MaxSeedAttempts {
		_, err := st.ClaimForkSeed(ctx, res.Fork.ID, other)
		must(t, err)
	}
	_, err = st.ClaimForkSeed(ctx, res.Fork.ID, other)
	wantClass(t, err, errdefs.ErrFenced)
	seed, err = st.GetForkSeed(ctx, res.Fork.ID, other)
	must(t, err)
	if seed.State != store.SeedFailed {
		t.Fatalf("seed after %d attempts: %+v", store.MaxSeedAttempts, seed)
	}
	for _, c := range onOther {
		b, err := st.GetSession(ctx, c.Session.ID)
		must(t, err)
		if b.Environment.State != store.EnvironmentFailed || b.Environment.FailureCode != store.ForkFailureSeed {
			t.Fatalf("a child on the failed seed's node: %+v", b.Environment)
		}
	}
}
