package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

func TestRecordObservationIsRevisionFencedEvidence(t *testing.T) {
	st, ctx := ownedStore(t)
	b, _ := storetest.RunningSession(t, st)
	a := b.Allocation
	if a.Observation.At != nil || a.Observation.Compute != "" {
		t.Fatalf("fresh allocation observed: %+v", a.Observation)
	}

	got, err := st.RecordObservation(ctx, store.RecordObservationParams{
		ID: a.ID, Revision: a.Revision, Compute: store.ObservedStopped, Reason: "compute_stopped",
	})
	must(t, err)
	o := got.Observation
	if o.At == nil || o.Compute != store.ObservedStopped || o.Reason != "compute_stopped" || o.KeepaliveAt != nil {
		t.Fatalf("observation %+v", o)
	}
	// Evidence only: neither the state nor the revision moved.
	if got.State != store.AllocationRunning || got.Revision != a.Revision {
		t.Fatalf("state %s revision %d, want running %d", got.State, got.Revision, a.Revision)
	}
	read, err := st.GetSession(ctx, b.Session.ID)
	must(t, err)
	if read.Allocation.Observation.Compute != store.ObservedStopped {
		t.Fatalf("session reads %+v", read.Allocation.Observation)
	}

	// A keepalive is confirmed only by running compute.
	_, err = st.RecordObservation(ctx, store.RecordObservationParams{
		ID: a.ID, Revision: a.Revision, Compute: store.ObservedStopped, Reason: "compute_stopped", Keepalive: true,
	})
	wantClass(t, err, errdefs.ErrInvalid)
	got, err = st.RecordObservation(ctx, store.RecordObservationParams{
		ID: a.ID, Revision: a.Revision, Compute: store.ObservedRunning, Reason: "compute_running", Keepalive: true,
	})
	must(t, err)
	if got.Observation.KeepaliveAt == nil || got.Observation.Compute != store.ObservedRunning {
		t.Fatalf("keepalive not recorded: %+v", got.Observation)
	}

	// Malformed input writes nothing.
	for _, p := range []store.RecordObservationParams{
		{ID: a.ID, Revision: a.Revision, Compute: "gone", Reason: "compute_missing"},
		{ID: a.ID, Revision: a.Revision, Compute: store.ObservedMissing, Reason: "No such container: x"},
		{ID: a.ID, Revision: a.Revision, Compute: store.ObservedMissing},
	} {
		_, err := st.RecordObservation(ctx, p)
		wantClass(t, err, errdefs.ErrInvalid)
	}
	_, err = st.RecordObservation(ctx, store.RecordObservationParams{
		ID: newUUID(t), Revision: 1, Compute: store.ObservedMissing, Reason: "compute_missing",
	})
	wantClass(t, err, errdefs.ErrNotFound)

	// A stale revision is fenced; so is an allocation whose cleanup was
	// requested while the provider was being asked.
	_, err = st.RecordObservation(ctx, store.RecordObservationParams{
		ID: a.ID, Revision: a.Revision - 1, Compute: store.ObservedMissing, Reason: "compute_missing",
	})
	wantClass(t, err, errdefs.ErrFenced)
	cleaning, err := st.RequestCleanup(ctx, a.ID)
	must(t, err)
	for _, rev := range []int64{a.Revision, cleaning.Revision} {
		_, err = st.RecordObservation(ctx, store.RecordObservationParams{
			ID: a.ID, Revision: rev, Compute: store.ObservedMissing, Reason: "compute_missing",
		})
		wantClass(t, err, errdefs.ErrFenced)
	}
	after, err := st.GetAllocation(ctx, a.ID)
	must(t, err)
	if after.Observation.Compute != store.ObservedRunning || after.State != store.AllocationCleanupRequested {
		t.Fatalf("fenced observation wrote: %+v", after)
	}

	// Another owner epoch is superseded.
	_, err = st.AsOwner(st.Epoch()+1).RecordObservation(ctx, store.RecordObservationParams{
		ID: a.ID, Revision: cleaning.Revision, Compute: store.ObservedMissing, Reason: "compute_missing",
	})
	wantClass(t, err, store.ErrSuperseded)
}

// runningOn commits a Session on node whose allocation is observed
// running with settled creation.
func runningOn(t *testing.T, st *storetest.Owned, node uuid.UUID) store.Allocation {
	t.Helper()
	ctx := t.Context()
	b, err := st.CreateSession(ctx, sessionParams(t, 1000))
	must(t, err)
	if b.Allocation.NodeID != node {
		t.Fatalf("placed on %s, want %s", b.Allocation.NodeID, node)
	}
	a, err := st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-" + a.ID.String(), BootstrapComplete: true})
	must(t, err)
	return a
}

func TestListObservableForNodePagesByNodeAndSaysWhatIsDue(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	var want []uuid.UUID
	for range store.NodePageSize + 3 {
		want = append(want, runningOn(t, st, node).ID)
	}
	// One allocation of the node still creating is not observable.
	creating, err := st.CreateSession(ctx, sessionParams(t, 1000))
	must(t, err)
	// Another node's running allocations never shorten a page.
	storetest.Absent(t, st, node)
	other := presentNode(t, ctx, st)
	for range 4 {
		runningOn(t, st, other)
	}

	scan := store.ObservableScan{NodeID: node, Limit: store.NodePageSize, ObserveAfter: time.Hour, KeepaliveAfter: time.Hour}
	var seen []uuid.UUID
	for {
		page, err := st.ListObservableForNode(ctx, scan)
		must(t, err)
		if len(page) == 0 {
			break
		}
		if len(seen) == 0 && len(page) != store.NodePageSize {
			t.Fatalf("first page has %d rows", len(page))
		}
		for _, o := range page {
			if o.NodeID != node || o.State != store.AllocationRunning {
				t.Fatalf("row %+v", o.Allocation)
			}
			if !o.ObservationDue || !o.KeepaliveDue || o.KeepaliveLapsed || o.RuntimeConnected || o.TurnRunning {
				t.Fatalf("fresh row flags %+v", o)
			}
			seen = append(seen, o.ID)
		}
		scan.After = page[len(page)-1].ID
	}
	if len(seen) != len(want) {
		t.Fatalf("paged %d, want %d", len(seen), len(want))
	}
	for _, id := range seen {
		if id == creating.Allocation.ID {
			t.Fatal("creating allocation listed")
		}
	}

	// After an observation and a keepalive nothing is due within the
	// waits; a keepalive an hour old has lapsed.
	a, err := st.GetAllocation(ctx, seen[0])
	must(t, err)
	_, err = st.RecordObservation(ctx, store.RecordObservationParams{
		ID: a.ID, Revision: a.Revision, Compute: store.ObservedRunning, Reason: "compute_running", Keepalive: true,
	})
	must(t, err)
	scan.After = uuid.Nil
	page, err := st.ListObservableForNode(ctx, scan)
	must(t, err)
	if page[0].ID != a.ID || page[0].ObservationDue || page[0].KeepaliveDue || page[0].KeepaliveLapsed {
		t.Fatalf("after observation %+v", page[0])
	}
	_, err = st.Pool().Exec(ctx, `UPDATE allocations SET keepalive_at = now() - interval '61 minutes', observed_at = now() - interval '61 minutes' WHERE id = $1`, a.ID)
	must(t, err)
	page, err = st.ListObservableForNode(ctx, scan)
	must(t, err)
	if !page[0].ObservationDue || !page[0].KeepaliveDue || !page[0].KeepaliveLapsed {
		t.Fatalf("an hour later %+v", page[0])
	}

	for _, bad := range []store.ObservableScan{
		{NodeID: node, Limit: 0, ObserveAfter: time.Second, KeepaliveAfter: time.Second},
		{NodeID: node, Limit: store.NodePageSize + 1, ObserveAfter: time.Second, KeepaliveAfter: time.Second},
		{NodeID: node, Limit: 1, KeepaliveAfter: time.Second},
	} {
		_, err := st.ListObservableForNode(ctx, bad)
		wantClass(t, err, errdefs.ErrInvalid)
	}
}

func TestEndTurnsOnLostComputeEndsRunningTurnsOnlyOnStoppedOrMissing(t *testing.T) {
	st, ctx, epoch := owner(t)
	b, cred := storetest.RunningSession(t, st)
	a := b.Allocation
	g := accept(t, ctx, st, b, cred, epoch)
	_, err := st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	_, _, err = st.SubmitTurn(ctx, turnParams(t, b.Session.ID, "sleep 100"))
	must(t, err)
	turn, ok, err := st.ClaimNextTurn(ctx, g.Conn)
	must(t, err)
	if !ok {
		t.Fatal("nothing claimed")
	}
	_, err = st.MarkTurnStarted(ctx, turn.ID, g.Conn)
	must(t, err)

	// Running and unavailable observations end nothing.
	for _, c := range []store.ObservedCompute{store.ObservedRunning, store.ObservedUnavailable} {
		_, err = st.RecordObservation(ctx, store.RecordObservationParams{ID: a.ID, Revision: a.Revision, Compute: c, Reason: "some_code"})
		must(t, err)
		refs, err := st.EndTurnsOnLostCompute(ctx)
		must(t, err)
		if len(refs) != 0 {
			t.Fatalf("%s observation ended %v", c, refs)
		}
	}
	_, err = st.RecordObservation(ctx, store.RecordObservationParams{ID: a.ID, Revision: a.Revision, Compute: store.ObservedMissing, Reason: "compute_missing"})
	must(t, err)
	refs, err := st.EndTurnsOnLostCompute(ctx)
	must(t, err)
	if len(refs) != 1 || refs[0].ID != turn.ID {
		t.Fatalf("ended %v", refs)
	}
	got, err := st.GetTurn(ctx, turn.ID)
	must(t, err)
	if got.State != store.TurnUnconfirmed || got.FailureCode != "compute_missing" {
		t.Fatalf("turn %s %q", got.State, got.FailureCode)
	}
	refs, err = st.EndTurnsOnLostCompute(ctx)
	must(t, err)
	if len(refs) != 0 {
		t.Fatalf("ended again %v", refs)
	}
}

// TestObservationMarksCountAsObservations: a page's mark of running
// compute found as recorded makes its rows not due without writing them;
// rows left out stay due; the lane's marks older than the horizon go as a
// new one is written; observation_time is the later of the row's time and
// its newest mark; a superseded owner and a malformed mark write nothing.
func TestObservationMarksCountAsObservations(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	a1, a2 := runningOn(t, st, node), runningOn(t, st, node)
	for _, a := range []store.Allocation{a1, a2} {
		_, err := st.RecordObservation(ctx, store.RecordObservationParams{
			ID: a.ID, Revision: a.Revision, Compute: store.ObservedRunning, Reason: "compute_running",
		})
		must(t, err)
	}
	_, err := st.Pool().Exec(ctx, `UPDATE allocations SET observed_at = now() - interval '1 minute' WHERE id = ANY($1)`,
		[]uuid.UUID{a1.ID, a2.ID})
	must(t, err)
	scan := store.ObservableScan{NodeID: node, Limit: store.NodePageSize, ObserveAfter: 30 * time.Second, KeepaliveAfter: time.Hour}
	due := func() map[uuid.UUID]store.Observable {
		t.Helper()
		page, err := st.ListObservableForNode(ctx, scan)
		must(t, err)
		out := map[uuid.UUID]store.Observable{}
		for _, o := range page {
			out[o.ID] = o
		}
		return out
	}
	page := due()
	if !page[a1.ID].ObservationDue || !page[a2.ID].ObservationDue || page[a1.ID].ReadAt.IsZero() {
		t.Fatalf("a minute after their observation: %+v", page)
	}
	readAt := page[a1.ID].ReadAt
	mark := store.ObservationMark{Lane: node, ReadAt: readAt, IDs: []uuid.UUID{a1.ID}}

	wantClass(t, st.Store.AsOwner(st.Epoch()+1).RecordObservationMark(ctx, mark, time.Minute), store.ErrSuperseded)
	for _, bad := range []store.ObservationMark{
		{Lane: node, ReadAt: readAt},
		{Lane: node, ReadAt: readAt, IDs: make([]uuid.UUID, store.MaxObservationMark+1)},
		{Lane: node, IDs: []uuid.UUID{a1.ID}},
	} {
		wantClass(t, st.RecordObservationMark(ctx, bad, time.Minute), errdefs.ErrInvalid)
	}
	wantClass(t, st.RecordObservationMark(ctx, mark, 0), errdefs.ErrInvalid)
	var marks int
	must(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM observation_marks`).Scan(&marks))
	if marks != 0 {
		t.Fatalf("%d marks after refusals", marks)
	}

	must(t, st.RecordObservationMark(ctx, mark, time.Minute))
	must(t, st.RecordObservationMark(ctx, mark, time.Minute)) // the same claim again adds nothing
	page = due()
	if page[a1.ID].ObservationDue || !page[a2.ID].ObservationDue {
		t.Fatalf("after a mark of a1 only: a1 due %v, a2 due %v", page[a1.ID].ObservationDue, page[a2.ID].ObservationDue)
	}
	got, err := st.GetAllocation(ctx, a1.ID)
	must(t, err)
	if got.Revision != a1.Revision || got.Observation.At == nil || !got.Observation.At.Before(readAt.Add(-50*time.Second)) {
		t.Fatalf("the mark wrote a1's row: %+v", got)
	}
	var at time.Time
	must(t, st.Pool().QueryRow(ctx, `SELECT observation_time(observed_at, node_id, id) FROM allocations WHERE id = $1`, a1.ID).Scan(&at))
	if !at.Equal(readAt) {
		t.Fatalf("observation_time %v, want the mark's %v", at, readAt)
	}
	got2, err := st.GetAllocation(ctx, a2.ID)
	must(t, err)
	must(t, st.Pool().QueryRow(ctx, `SELECT observation_time(observed_at, node_id, id) FROM allocations WHERE id = $1`, a2.ID).Scan(&at))
	if !at.Equal(*got2.Observation.At) {
		t.Fatalf("a2's observation_time %v, want its row's %v: a mark that does not list it counted", at, *got2.Observation.At)
	}
	// Another lane's mark never counts for this one.
	must(t, st.RecordObservationMark(ctx, store.ObservationMark{Lane: store.DirectLane, ReadAt: readAt, IDs: []uuid.UUID{a2.ID}}, time.Minute))
	if page = due(); !page[a2.ID].ObservationDue {
		t.Fatal("a2 not due after a mark of another lane")
	}

	// A mark older than the horizon goes when the lane's next one is
	// written; then a1's time falls back to its row's, and it is due.
	_, err = st.Pool().Exec(ctx, `UPDATE observation_marks SET observed_at = observed_at - interval '2 minutes' WHERE lane = $1`, node)
	must(t, err)
	must(t, st.RecordObservationMark(ctx, store.ObservationMark{Lane: node, ReadAt: readAt, IDs: []uuid.UUID{a2.ID}}, time.Minute))
	must(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM observation_marks WHERE lane = $1`, node).Scan(&marks))
	if marks != 1 {
		t.Fatalf("%d marks of the node after the prune, want a2's alone", marks)
	}
	page = due()
	if !page[a1.ID].ObservationDue || page[a2.ID].ObservationDue {
		t.Fatalf("after the prune: a1 due %v, a2 due %v", page[a1.ID].ObservationDue, page[a2.ID].ObservationDue)
	}
}

// TestGetAllocationAddressesReadsThoseThatExistInIDOrder: one narrow read
// for a page of ids (the node proxy's generations): unknown ids are left
// out, the rows come in id order with each allocation's own address, and
// more than a mark's ids are refused.
func TestGetAllocationAddressesReadsThoseThatExistInIDOrder(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	a1, a2 := runningOn(t, st, node), runningOn(t, st, node)
	got, err := st.GetAllocationAddresses(ctx, []uuid.UUID{a2.ID, newUUID(t), a1.ID})
	must(t, err)
	want := []store.AllocationAddress{a1.Address(), a2.Address()}
	if bytes.Compare(want[0].ID[:], want[1].ID[:]) > 0 {
		want[0], want[1] = want[1], want[0]
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] || got[0].Generation == 0 || got[0].NodeID != node {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if !got[0].Answers(node, got[0].Reference()) || got[0].Answers(newUUID(t), got[0].Reference()) || got[0].Answers(node, got[1].Reference()) {
		t.Fatal("an address answers a call on another lane or about another reference")
	}
	none, err := st.GetAllocationAddresses(ctx, nil)
	must(t, err)
	if len(none) != 0 {
		t.Fatalf("no ids read %d rows", len(none))
	}
	_, err = st.GetAllocationAddresses(ctx, make([]uuid.UUID, store.MaxObservationMark+1))
	wantClass(t, err, errdefs.ErrInvalid)
}
