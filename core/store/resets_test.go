package store_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

// resetFixture is an owner with a committed generation 1 and a present
// node.
func resetFixture(t *testing.T) (*storetest.Owned, uuid.UUID) {
	t.Helper()
	st, ctx := ownedStore(t)
	_, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker"))
	must(t, err)
	return st, presentNode(t, ctx, st)
}

func startReset(t *testing.T, st *storetest.Owned, timeout time.Duration) store.Reset {
	t.Helper()
	r, err := st.StartReset(t.Context(), uuid.New(), timeout, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	return r
}

// TestResetFencesAdmissionAndDeploymentChanges: an active reset refuses a
// new Session, a Create, a commit, a replacement and the provider switch
// (deployment_resetting), never a deletion; a second reset of another
// request is reset_in_progress and the same request returns its reset;
// a reset is an administrator's act with a bounded timeout.
func TestResetFencesAdmissionAndDeploymentChanges(t *testing.T) {
	st, _ := resetFixture(t)
	ctx := t.Context()
	_, pending := newSession(t, ctx, st)
	_, live := newSession(t, ctx, st)

	if _, err := st.StartReset(ctx, uuid.New(), time.Hour, store.NewCoreProvenance("test", uuid.New()), uuid.New()); !errdefs.IsInvalid(err) {
		t.Fatalf("a reset by core: %v", err)
	}
	if _, err := st.StartReset(ctx, uuid.New(), 25*time.Hour, store.NewAdminProvenance(uuid.New()), uuid.New()); !errdefs.IsInvalid(err) {
		t.Fatalf("a reset of 25h: %v", err)
	}
	req := uuid.New()
	r, err := st.StartReset(ctx, uuid.New(), time.Hour, store.NewAdminProvenance(req), uuid.New())
	must(t, err)
	if r.Phase != store.ResetArchiving || r.Generation != 1 || r.Deadline.Sub(r.RequestedAt) != time.Hour || r.Actor != "admin" {
		t.Fatalf("started %+v", r)
	}
	again, err := st.StartReset(ctx, uuid.New(), time.Hour, store.NewAdminProvenance(req), uuid.New())
	must(t, err)
	if again.ID != r.ID {
		t.Fatalf("the same request started another reset %s, want %s", again.ID, r.ID)
	}
	if _, err := st.StartReset(ctx, uuid.New(), time.Hour, store.NewAdminProvenance(uuid.New()), uuid.New()); !wantReason(err, "reset_in_progress") {
		t.Fatalf("a second reset: %v", err)
	}

	if _, err := st.CreateSession(ctx, sessionParams(t, 5)); !wantReason(err, "deployment_resetting") {
		t.Fatalf("create during a reset: %v", err)
	}
	if _, err := st.ClaimCreate(ctx, pending.Allocation.ID, pending.Allocation.CreateReceipt); !wantReason(err, "deployment_resetting") {
		t.Fatalf("claim during a reset: %v", err)
	}
	if _, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker")); !wantReason(err, "deployment_resetting") {
		t.Fatalf("commit during a reset: %v", err)
	}
	if _, err := st.ReplaceGeneration(ctx, storetest.Seen(t, st), testGeneration("other"), store.Replacement{},
		store.NewAdminProvenance(uuid.New()), uuid.New()); !wantReason(err, "deployment_resetting") {
		t.Fatalf("replace during a reset: %v", err)
	}
	if _, err := st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New()); !wantReason(err, "deployment_resetting") {
		t.Fatalf("disable during a reset: %v", err)
	}
	if _, _, err := st.DeleteSession(ctx, live.Session.ID); err != nil {
		t.Fatalf("delete during a reset: %v", err)
	}
	a, err := st.GetAllocation(ctx, pending.Allocation.ID)
	must(t, err)
	if a.State != store.AllocationAllocated || a.CreateReceipt != pending.Allocation.CreateReceipt {
		t.Fatalf("the refused claim changed the allocation: %s", a.State)
	}
}

// TestResetArchivePagesResume: the archive reads keyset pages of 32 in
// (created_at, id) order, bound to the request time; a runner stopped
// between Sessions resumes after the last one it archived (the cursor is
// in each archive's transaction); a Session deleted since its page was
// read is passed over; each archive is recorded with the reset as parent
// and the requester's request id.
func TestResetArchivePagesResume(t *testing.T) {
	st, _ := resetFixture(t)
	ctx := t.Context()
	const n = store.ResetPageSize + 8
	var ids []uuid.UUID
	for range n {
		b, err := st.CreateSession(ctx, sessionParams(t, n))
		must(t, err)
		ids = append(ids, b.Session.ID)
	}
	// The last one is deleted before the reset: not active, not archived.
	_, _, err := st.DeleteSession(ctx, ids[n-1])
	must(t, err)
	r := startReset(t, st, time.Hour)

	page, err := st.ResetPage(ctx, r)
	must(t, err)
	if len(page) != store.ResetPageSize {
		t.Fatalf("first page %d Sessions", len(page))
	}
	for _, s := range page[:5] {
		_, err := st.ArchiveForReset(ctx, r, s, uuid.New())
		must(t, err)
	}
	// "Restart": the runner reads the reset again.
	r, err = st.ActiveReset(ctx)
	must(t, err)
	if r.SessionsArchived != 5 {
		t.Fatalf("archived %d, want 5", r.SessionsArchived)
	}
	var seen []uuid.UUID
	for {
		page, err := st.ResetPage(ctx, r)
		must(t, err)
		if len(page) == 0 {
			break
		}
		for _, s := range page {
			seen = append(seen, s.ID)
			_, err := st.ArchiveForReset(ctx, r, s, uuid.New())
			must(t, err)
		}
		if r, err = st.ActiveReset(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != n-1-5 {
		t.Fatalf("the resumed archive read %d Sessions, want %d", len(seen), n-1-5)
	}
	for _, id := range seen {
		for _, done := range page[:5] {
			if id == done.ID {
				t.Fatalf("Session %s archived twice", id)
			}
		}
	}
	if r.SessionsArchived != n-1 {
		t.Fatalf("archived %d, want %d", r.SessionsArchived, n-1)
	}
	for _, id := range ids[:n-1] {
		b, err := st.GetSession(ctx, id)
		must(t, err)
		if b.Session.State != store.SessionArchived {
			t.Fatalf("Session %s is %s", id, b.Session.State)
		}
	}
	events, err := st.ListAuditEvents(ctx, store.AuditFilter{ActionPrefix: "session.archive", End: ptr(time.Now().Add(time.Hour))}, store.AuditCursor{}, 100)
	must(t, err)
	if len(events) != n-1 {
		t.Fatalf("%d archive events, want %d", len(events), n-1)
	}
	for _, e := range events {
		if e.ParentID == nil || *e.ParentID != r.ID || e.RequestID != r.RequestID || e.Actor() != "admin" || e.ProjectID == nil {
			t.Fatalf("archive event %+v", e)
		}
	}
	// A reset that moved on archives nothing more.
	must(t, st.MoveReset(ctx, r.ID, store.ResetArchiving, store.ResetDraining))
	if _, err := st.ArchiveForReset(ctx, r, store.ResetSession{ID: ids[0], CreatedAt: time.Now()}, uuid.New()); !errdefs.IsFenced(err) {
		t.Fatalf("archive for a draining reset: %v", err)
	}
}

// TestResetHeldPartitionsByPresence: the held snapshot counts unreleased
// allocations by node, present by the node_present rule: a node whose
// last report is older than 45 s (database clock) or whose connection
// ended counts offline; nothing is released by reading.
func TestResetHeldPartitionsByPresence(t *testing.T) {
	st, node := resetFixture(t)
	ctx := t.Context()
	newSession(t, ctx, st)
	newSession(t, ctx, st)
	lanes, err := st.ListHeld(ctx)
	must(t, err)
	if len(lanes) != 1 || lanes[0].Node != node || lanes[0].Held != 2 || !lanes[0].Present {
		t.Fatalf("held %+v", lanes)
	}
	_, err = st.Pool().Exec(ctx, `UPDATE node_presence SET reported_at = now() - interval '46 seconds' WHERE node_id = $1`, node)
	must(t, err)
	lanes, err = st.ListHeld(ctx)
	must(t, err)
	if held, offline := store.Held(lanes); held != 2 || offline != 2 {
		t.Fatalf("a node silent for 46 s: held %d offline %d", held, offline)
	}
	storetest.Present(t, st, node, 1)
	storetest.Absent(t, st, node)
	lanes, err = st.ListHeld(ctx)
	must(t, err)
	if held, offline := store.Held(lanes); held != 2 || offline != 2 {
		t.Fatalf("a disconnected node: held %d offline %d", held, offline)
	}
}

// TestResetFinalizeClearsOnlyAtZero: finalization under the deployment
// lock refuses while anything is held (and the reset drains again); at
// zero it clears the deployment (no current generation, no serving pin,
// the floor at a new empty generation), lifts the fence, retires the
// enabled nodes, revokes unused enrollment tokens and records
// reset.start, node.retire and reset.finish; the next commit goes above
// the empty generation and admission works again.
func TestResetFinalizeClearsOnlyAtZero(t *testing.T) {
	st, node := resetFixture(t)
	ctx := t.Context()
	b, _ := storetest.RunningSession(t, st)
	_, _ = newToken(t, ctx, st.Store)
	r := startReset(t, st, time.Hour)
	page, err := st.ResetPage(ctx, r)
	must(t, err)
	for _, s := range page {
		_, err := st.ArchiveForReset(ctx, r, s, uuid.New())
		must(t, err)
	}
	must(t, st.MoveReset(ctx, r.ID, store.ResetArchiving, store.ResetDraining))
	must(t, st.MoveReset(ctx, r.ID, store.ResetDraining, store.ResetFinalizing))
	if _, err := st.FinalizeReset(ctx, r, uuid.New()); !wantReason(err, "reset_resources_held") {
		t.Fatalf("finalize while held: %v", err)
	}
	if r, err = st.ActiveReset(ctx); err != nil || r.Phase != store.ResetDraining {
		t.Fatalf("after a refused finalization: %s, %v", r.Phase, err)
	}
	if _, err := st.CurrentGeneration(ctx); err != nil {
		t.Fatalf("a refused finalization cleared the deployment: %v", err)
	}
	a, err := st.GetAllocation(ctx, b.Allocation.ID)
	must(t, err)
	storetest.Release(t, st, a)
	lanes, err := st.ListHeld(ctx)
	must(t, err)
	if len(lanes) != 0 {
		t.Fatalf("held after release: %+v", lanes)
	}
	must(t, st.MoveReset(ctx, r.ID, store.ResetDraining, store.ResetFinalizing))
	finishID := uuid.New()
	fin, err := st.FinalizeReset(ctx, r, finishID)
	must(t, err)
	if fin.Reset.Phase != store.ResetDone || fin.Reset.EmptyGeneration != 2 || fin.Reset.EndedAt == nil ||
		len(fin.RetiredNodes) < 2 || fin.RevokedTokens != 1 {
		t.Fatalf("finalized %+v", fin)
	}
	if _, err := st.ActiveReset(ctx); !errdefs.IsNotFound(err) {
		t.Fatalf("an active reset after done: %v", err)
	}
	if _, err := st.CurrentGeneration(ctx); !errdefs.IsNotFound(err) {
		t.Fatalf("a current generation after the reset: %v", err)
	}
	if pin, err := st.GetServingPin(ctx); err != nil || pin.Generation != 0 {
		t.Fatalf("serving pin after the reset: %+v, %v", pin, err)
	}
	n, err := st.GetNode(ctx, node)
	must(t, err)
	if n.State != store.NodeRetired {
		t.Fatalf("node %s after the reset", n.State)
	}
	seen := storetest.Seen(t, st)
	if seen.Generation() != 2 {
		t.Fatalf("seen generation %d after the reset, want the empty generation 2", seen.Generation())
	}
	g, err := st.CommitGeneration(ctx, seen, testGeneration("other"))
	must(t, err)
	if g.Generation != 3 {
		t.Fatalf("the commit after the reset is generation %d, want 3", g.Generation)
	}
	if _, err := st.CreateSession(ctx, sessionParams(t, 5)); wantReason(err, "deployment_resetting") {
		t.Fatalf("admission still fenced: %v", err)
	}
	events, err := st.ListAuditEvents(ctx, store.AuditFilter{ActionPrefix: "reset.", End: ptr(time.Now().Add(time.Hour))}, store.AuditCursor{}, 10)
	must(t, err)
	if len(events) != 2 || events[0].Action != "reset.start" || events[1].Action != "reset.finish" || events[1].ID != finishID ||
		events[1].ParentID == nil || *events[1].ParentID != r.ID || events[1].RequestID != r.RequestID {
		t.Fatalf("reset events %+v", events)
	}
	retired, err := st.ListAuditEvents(ctx, store.AuditFilter{ActionPrefix: "node.retire", End: ptr(time.Now().Add(time.Hour))}, store.AuditCursor{}, 10)
	must(t, err)
	parented := 0
	for _, e := range retired {
		if e.ParentID != nil && *e.ParentID == finishID {
			parented++
		}
	}
	if parented != len(fin.RetiredNodes) {
		t.Fatalf("%d node.retire events under the reset, want %d", parented, len(fin.RetiredNodes))
	}
}

// TestResetDeadlineFailsAndReopens: past its deadline (database clock) a
// reset ends failed reset_deadline_passed; the fence lifts, the
// committed generation stays and admission works again; before it,
// nothing fails.
func TestResetDeadlineFailsAndReopens(t *testing.T) {
	st, _ := resetFixture(t)
	ctx := t.Context()
	newSession(t, ctx, st)
	r := startReset(t, st, time.Hour)
	if failed, err := st.FailExpiredReset(ctx, r, uuid.New()); err != nil || failed {
		t.Fatalf("failed before the deadline: %v, %v", failed, err)
	}
	_, err := st.Pool().Exec(ctx, `UPDATE deployment_resets SET requested_at = now() - interval '2 hours', deadline = now() - interval '1 second' WHERE id = $1`, r.ID)
	must(t, err)
	if r, err = st.ActiveReset(ctx); err != nil || !r.Expired {
		t.Fatalf("expired %v, %v", r.Expired, err)
	}
	failed, err := st.FailExpiredReset(ctx, r, uuid.New())
	must(t, err)
	if !failed {
		t.Fatal("the expired reset was not failed")
	}
	got, err := st.GetReset(ctx, r.ID)
	must(t, err)
	if got.Phase != store.ResetFailed || got.FailureCode != store.ResetFailureDeadline || got.EndedAt == nil {
		t.Fatalf("failed reset %+v", got)
	}
	if g, err := st.CurrentGeneration(ctx); err != nil || g.Generation != 1 {
		t.Fatalf("current generation after a failed reset: %d, %v", g.Generation, err)
	}
	if _, err := st.CreateSession(ctx, sessionParams(t, 5)); err != nil {
		t.Fatalf("admission after a failed reset: %v", err)
	}
	latest, err := st.LatestReset(ctx)
	must(t, err)
	if latest.ID != r.ID {
		t.Fatalf("latest %s, want %s", latest.ID, r.ID)
	}
}

// wantReason reports whether err is a refusal with reason.
func wantReason(err error, reason string) bool {
	r, ok := errdefs.AsRefusal(err)
	return ok && r.Reason == reason
}
