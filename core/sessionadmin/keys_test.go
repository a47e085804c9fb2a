package sessionadmin_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/projects"
	"berth.dev/core/store"
)

// TestGRPCProjectKeySeesOnlyItsProject: a project key creates Sessions in
// its own project, sees them without node or allocation, lists only them,
// and gets for another project's Session exactly the answer a missing
// Session gets; it may not suspend, resume or read allocations; naming
// another project on create is NOT_FOUND.
func TestGRPCProjectKeySeesOnlyItsProject(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	tenant, _, err := f.St.CreateTenant(f.Ctx, uuid.New(), uuid.New(), "team")
	errdefstest.Must(t, err)
	p, _, err := f.St.CreateProject(f.Ctx, uuid.New(), uuid.New(), tenant.ID, "agents")
	errdefstest.Must(t, err)
	tok, id, digest, err := projects.NewKeyToken()
	errdefstest.Must(t, err)
	_, _, err = f.St.CreateProjectKey(f.Ctx, store.NewProjectKey{RequestID: uuid.New(), ID: id, ProjectID: p.ID, Digest: digest[:]})
	errdefstest.Must(t, err)
	index := projects.NewKeyIndex(f.St.Reader, time.Now)
	errdefstest.Must(t, index.Load(f.Ctx))
	c := f.serveWith(t, index)
	adminCtx := c.authed(f.Ctx)
	keyCtx := metadata.AppendToOutgoingContext(f.Ctx, "authorization", "Bearer "+tok.Reveal())
	pName := admin.ProjectName.Format(tenant.ID.String(), p.ID.String())

	theirs, err := c.CreateSession(adminCtx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	mine, err := c.CreateSession(keyCtx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	if s := mine.GetSession(); s.GetProject() != pName || s.GetNode() != "" || s.GetAllocation() != "" {
		t.Fatalf("key's Session: project %q node %q allocation %q", s.GetProject(), s.GetNode(), s.GetAllocation())
	}
	if theirs.GetSession().GetNode() == "" {
		t.Fatal("the administrator does not see the node")
	}
	// Naming another project is NOT_FOUND, as a missing project is.
	_, err = c.CreateSession(keyCtx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{Project: theirs.GetSession().GetProject()}})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)

	list, err := c.ListSessions(keyCtx, &adminv1.ListSessionsRequest{})
	errdefstest.Must(t, err)
	if len(list.GetSessions()) != 1 || list.GetSessions()[0].GetName() != mine.GetSession().GetName() || list.GetSessions()[0].GetNode() != "" {
		t.Fatalf("key lists %v", list.GetSessions())
	}
	filtered, err := c.ListSessions(keyCtx, &adminv1.ListSessionsRequest{Project: theirs.GetSession().GetProject()})
	errdefstest.Must(t, err)
	if len(filtered.GetSessions()) != 0 {
		t.Fatal("a key lists another project's Sessions through the filter")
	}

	// Another project's Session answers exactly as a missing one.
	answer := func(call func(ctx context.Context, name string) error, name string) *status.Status {
		s, _ := status.FromError(call(keyCtx, name))
		return s
	}
	missing := admin.SessionName.Format(uuid.NewString())
	for method, call := range map[string]func(ctx context.Context, name string) error{
		"GetSession": func(ctx context.Context, name string) error {
			_, err := c.GetSession(ctx, &adminv1.GetSessionRequest{Name: name})
			return err
		},
		"DeleteSession": func(ctx context.Context, name string) error {
			_, err := c.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: name})
			return err
		},
	} {
		got, want := answer(call, theirs.GetSession().GetName()), answer(call, missing)
		if got.Code() != codes.NotFound || got.Code() != want.Code() || got.Message() != want.Message() {
			t.Errorf("%s of another project's Session: %v %q; of a missing one: %v %q", method, got.Code(), got.Message(), want.Code(), want.Message())
		}
	}
	after, err := c.GetSession(adminCtx, &adminv1.GetSessionRequest{Name: theirs.GetSession().GetName()})
	errdefstest.Must(t, err)
	if after.GetSession().GetDeleteTime() != nil {
		t.Fatal("a key deleted another project's Session")
	}

	// Administrator-only methods.
	_, err = c.SuspendSession(keyCtx, &adminv1.SuspendSessionRequest{Name: mine.GetSession().GetName(), RequestId: uuid.NewString()})
	admintest.WantStatus(t, err, codes.PermissionDenied, admin.ReasonKeyMethodDenied)
	_, err = c.ListAllocations(keyCtx, &adminv1.ListAllocationsRequest{})
	admintest.WantStatus(t, err, codes.PermissionDenied, admin.ReasonKeyMethodDenied)

	// Its own Session it may delete.
	_, err = c.DeleteSession(keyCtx, &adminv1.DeleteSessionRequest{Name: mine.GetSession().GetName()})
	errdefstest.Must(t, err)
}
