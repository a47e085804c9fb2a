package store_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

// TestArchiveIsOneTerminalCleanup: an archive of a live Session with a
// running and queued Turns revokes the device, ends the Environment
// (expired, cause archived), fails the queued Turns session_archived,
// asks the running Turn to cancel and records it as the allocation's
// archive_cancel_turn_id, requests cleanup and marks the Session archived,
// all or nothing (a failure injected at the last write leaves every row
// as it was); archiving again changes nothing; the archived Session's
// Turns stay readable and a new Turn is refused session_archived; a later
// deletion keeps archived_at and the recorded Turn.
func TestArchiveIsOneTerminalCleanup(t *testing.T) {
	st, ctx, _ := owner(t)
	f := newTerminalFixture(t, ctx, st)
	before := snapshot(t, ctx, st.Store)

	_, err := st.Pool().Exec(ctx, `
CREATE FUNCTION refuse_archive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'injected' USING ERRCODE = 'check_violation', CONSTRAINT = 'injected';
END;
$$;
CREATE TRIGGER refuse_archive BEFORE UPDATE ON sessions FOR EACH ROW
    WHEN (NEW.state = 'archived') EXECUTE FUNCTION refuse_archive();`)
	must(t, err)
	if _, _, err := st.ArchiveSession(ctx, f.b.Session.ID, store.NewAdminProvenance(uuid.New()), uuid.New()); err == nil {
		t.Fatal("archive succeeded despite the injected failure")
	}
	if got := snapshot(t, ctx, st.Store); got != before {
		t.Fatalf("a failed archive changed rows:\n%s\nwant\n%s", got, before)
	}
	_, err = st.Pool().Exec(ctx, `DROP TRIGGER refuse_archive ON sessions`)
	must(t, err)

	if _, _, err := st.ArchiveSession(ctx, f.b.Session.ID, store.Provenance{}, uuid.New()); !errdefs.IsInvalid(err) {
		t.Fatalf("archive without provenance: %v", err)
	}
	if n := archiveEvents(t, st); n != 0 {
		t.Fatalf("refused archives recorded %d events", n)
	}
	requestID := uuid.New()
	b, term, err := st.ArchiveSession(ctx, f.b.Session.ID, store.NewAdminProvenance(requestID), uuid.New())
	must(t, err)
	events, err := st.ListAuditEvents(ctx, store.AuditFilter{ActionPrefix: "session.archive", End: ptr(time.Now().Add(time.Hour))}, store.AuditCursor{}, 10)
	must(t, err)
	if len(events) != 1 || events[0].Actor() != "admin" || events[0].RequestID != requestID || events[0].Kind != store.AuditDecision ||
		events[0].Resource != "sessions/"+f.b.Session.ID.String() || events[0].ProjectID == nil || *events[0].ProjectID != f.b.Session.ProjectID {
		t.Fatalf("archive events %+v", events)
	}
	if b.Session.State != store.SessionArchived || b.Session.ArchivedAt == nil || b.Session.DeleteRequestedAt != nil {
		t.Fatalf("session %s archived at %v", b.Session.State, b.Session.ArchivedAt)
	}
	if b.Environment.State != store.EnvironmentExpired || b.Environment.TerminalCause != store.TerminalArchived {
		t.Fatalf("environment %s cause %s", b.Environment.State, b.Environment.TerminalCause)
	}
	if term.Cause != store.TerminalArchived || term.Revoked != f.b.Allocation.ID || len(term.CancelRequested) != 1 || term.CancelRequested[0] != f.running {
		t.Fatalf("termination %+v", term)
	}
	a, err := st.GetAllocation(ctx, f.b.Allocation.ID)
	must(t, err)
	if a.DeviceRevokedAt == nil || a.State != store.AllocationCleanupRequested || a.ArchiveCancelTurnID == nil || *a.ArchiveCancelTurnID != f.running {
		t.Fatalf("allocation %s revoked %v archive turn %v", a.State, a.DeviceRevokedAt != nil, a.ArchiveCancelTurnID)
	}
	wantTurn(t, ctx, st, f.queued, store.TurnFailed, store.TurnFailureSessionArchived)
	running := wantTurn(t, ctx, st, f.running, store.TurnRunning, "")
	if running.CancelRequestedAt == nil {
		t.Fatal("the running Turn was not asked to cancel")
	}

	after := snapshot(t, ctx, st.Store)
	again, term, err := st.ArchiveSession(ctx, f.b.Session.ID, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	if again.Session.State != store.SessionArchived || term.SessionID != uuid.Nil {
		t.Fatalf("archiving again: %s, %+v", again.Session.State, term)
	}
	if got := snapshot(t, ctx, st.Store); got != after || archiveEvents(t, st) != 1 {
		t.Fatal("archiving again changed rows or recorded another decision")
	}
	if _, _, err := st.SubmitTurn(ctx, turnParams(t, f.b.Session.ID, "late")); !isRefusal(err, "session_archived") {
		t.Fatalf("SubmitTurn to an archived Session: %v", err)
	}

	del, _, err := st.DeleteSession(ctx, f.b.Session.ID)
	must(t, err)
	if del.Session.State != store.SessionDeleteRequested || del.Session.ArchivedAt == nil {
		t.Fatalf("deleted after the archive: %s, archived at %v", del.Session.State, del.Session.ArchivedAt)
	}
	a, err = st.GetAllocation(ctx, f.b.Allocation.ID)
	must(t, err)
	if a.ArchiveCancelTurnID == nil || *a.ArchiveCancelTurnID != f.running {
		t.Fatal("the deletion's cleanup changed the archive's recorded Turn")
	}
	if _, _, err := st.ArchiveSession(ctx, f.b.Session.ID, store.NewAdminProvenance(uuid.New()), uuid.New()); !isRefusal(err, "session_deleted") {
		t.Fatalf("archive of a deleted Session: %v", err)
	}
}

// TestArchiveAfterAnEndedEnvironmentRecordsNoTurn: when the Environment
// already ended (here: failed), its device was revoked by that cleanup, so
// the archive records no archive_cancel_turn_id and keeps the first cause.
func TestArchiveAfterAnEndedEnvironmentRecordsNoTurn(t *testing.T) {
	st, ctx, _ := owner(t)
	f := newTerminalFixture(t, ctx, st)
	_, err := st.TerminateEnvironment(ctx, f.b.Environment.ID, store.TerminalFailed, "create_failed")
	must(t, err)
	b, _, err := st.ArchiveSession(ctx, f.b.Session.ID, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	if b.Session.State != store.SessionArchived || b.Environment.TerminalCause != store.TerminalFailed {
		t.Fatalf("session %s, cause %s", b.Session.State, b.Environment.TerminalCause)
	}
	a, err := st.GetAllocation(ctx, f.b.Allocation.ID)
	must(t, err)
	if a.ArchiveCancelTurnID != nil {
		t.Fatal("an archive that revoked nothing recorded a Turn")
	}
}

// isRefusal reports whether err is a refusal with reason.
func isRefusal(err error, reason string) bool {
	r, ok := errdefs.AsRefusal(err)
	return ok && r.Reason == reason
}

// archiveEvents counts the recorded session.archive decisions.
func archiveEvents(t *testing.T, st *storetest.Owned) int {
	t.Helper()
	var n int
	must(t, st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM audit_events WHERE action = 'session.archive'`).Scan(&n))
	return n
}

func ptr[T any](v T) *T { return &v }
