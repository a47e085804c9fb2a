package sessionadmin_test

import (
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin/admintest"
	"berth.dev/core/store"
)

// TestGRPCArchiveSession: ArchiveSession answers the Session ARCHIVED
// with its Environment ended, again unchanged; a deleted Session is
// refused session_deleted with its fixed message; a missing one is
// NOT_FOUND.
func TestGRPCArchiveSession(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 4)
	c := f.serve(t)
	ctx := c.authed(f.Ctx)
	created, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	name := created.GetSession().GetName()

	archived, err := c.ArchiveSession(ctx, &adminv1.ArchiveSessionRequest{Name: name})
	errdefstest.Must(t, err)
	if s := archived.GetSession(); s.GetState() != adminv1.Session_STATE_ARCHIVED || s.GetEnvironment().GetExecutionAdmitted() {
		t.Fatalf("archived: %v", s)
	}
	again, err := c.ArchiveSession(ctx, &adminv1.ArchiveSessionRequest{Name: name})
	errdefstest.Must(t, err)
	if again.GetSession().GetState() != adminv1.Session_STATE_ARCHIVED {
		t.Fatalf("archived again: %v", again.GetSession().GetState())
	}
	got, err := c.GetSession(ctx, &adminv1.GetSessionRequest{Name: name})
	errdefstest.Must(t, err)
	if got.GetSession().GetState() != adminv1.Session_STATE_ARCHIVED {
		t.Fatalf("GetSession: %v", got.GetSession().GetState())
	}
	b, err := f.St.GetSession(f.Ctx, uuid.MustParse(name[len("sessions/"):]))
	errdefstest.Must(t, err)
	if b.Environment.TerminalCause != store.TerminalArchived || b.Allocation.DeviceRevokedAt == nil {
		t.Fatalf("stored: cause %q, device revoked %v", b.Environment.TerminalCause, b.Allocation.DeviceRevokedAt != nil)
	}

	// Deleted, then archived: refused.
	_, err = c.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: name})
	errdefstest.Must(t, err)
	_, err = c.ArchiveSession(ctx, &adminv1.ArchiveSessionRequest{Name: name})
	if s := admintest.WantStatus(t, err, codes.FailedPrecondition, "session_deleted"); s.Message() != "the Session is deleted: archive applies to live Sessions" {
		t.Fatalf("message %q", s.Message())
	}
	_, err = c.ArchiveSession(ctx, &adminv1.ArchiveSessionRequest{Name: "sessions/" + uuid.NewString()})
	admintest.WantStatus(t, err, codes.NotFound, "not_found")
}
