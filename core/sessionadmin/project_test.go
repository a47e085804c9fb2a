package sessionadmin_test

import (
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/store"
)

// TestGRPCSessionsInProjects: CreateSession puts a Session in the project
// session.project names (else the default one) and every Session names
// its project; a project of another tenant than its name says, or a
// missing one, is NOT_FOUND and creates nothing; ListSessions' project
// filter lists that project only, and a project that does not exist lists
// nothing.
func TestGRPCSessionsInProjects(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	c := f.serve(t)
	ctx := c.authed(f.Ctx)
	tenant, _, err := f.St.CreateTenant(f.Ctx, uuid.New(), uuid.New(), "team")
	errdefstest.Must(t, err)
	p, _, err := f.St.CreateProject(f.Ctx, uuid.New(), uuid.New(), tenant.ID, "agents")
	errdefstest.Must(t, err)
	pName := admin.ProjectName.Format(tenant.ID.String(), p.ID.String())
	defName := admin.ProjectName.Format(store.DefaultTenantID.String(), store.DefaultProjectID.String())

	in, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{Project: pName}})
	errdefstest.Must(t, err)
	if got := in.GetSession().GetProject(); got != pName {
		t.Fatalf("created in %q, want %q", got, pName)
	}
	def, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	if got := def.GetSession().GetProject(); got != defName {
		t.Fatalf("created in %q, want the default project %q", got, defName)
	}
	b, err := f.St.GetSession(f.Ctx, uuid.MustParse(in.GetSession().GetName()[len("sessions/"):]))
	errdefstest.Must(t, err)
	if b.Session.TenantID != tenant.ID || b.Session.ProjectID != p.ID {
		t.Fatal("the stored Session is not in the named project and its tenant")
	}

	for _, project := range []string{
		admin.ProjectName.Format(store.DefaultTenantID.String(), p.ID.String()), // another tenant
		admin.ProjectName.Format(tenant.ID.String(), uuid.NewString()),          // missing
	} {
		_, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{Project: project}})
		admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	}
	_, err = c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{Project: "projects/x"}})
	admintest.WantInvalidField(t, err, "session.project")

	list := func(project string) []string {
		t.Helper()
		var names []string
		token := ""
		for {
			r, err := c.ListSessions(ctx, &adminv1.ListSessionsRequest{Project: project, PageSize: 1, PageToken: token})
			errdefstest.Must(t, err)
			for _, s := range r.GetSessions() {
				names = append(names, s.GetName())
			}
			if token = r.GetNextPageToken(); token == "" {
				return names
			}
		}
	}
	if got := list(pName); len(got) != 1 || got[0] != in.GetSession().GetName() {
		t.Fatalf("ListSessions(project) = %v", got)
	}
	if got := list(""); len(got) != 2 {
		t.Fatalf("ListSessions() = %v, want both", got)
	}
	for _, project := range []string{
		admin.ProjectName.Format(store.DefaultTenantID.String(), p.ID.String()),
		admin.ProjectName.Format(tenant.ID.String(), uuid.NewString()),
	} {
		if got := list(project); len(got) != 0 {
			t.Fatalf("ListSessions(%s) = %v, want none", project, got)
		}
	}
	_, err = c.ListSessions(ctx, &adminv1.ListSessionsRequest{Project: "tenants/x"})
	admintest.WantInvalidField(t, err, "project")

	// Allocations name their Session's project and filter by it.
	allocs, err := c.ListAllocations(ctx, &adminv1.ListAllocationsRequest{Project: pName})
	errdefstest.Must(t, err)
	if len(allocs.GetAllocations()) != 1 || allocs.GetAllocations()[0].GetProject() != pName ||
		allocs.GetAllocations()[0].GetSession() != in.GetSession().GetName() {
		t.Fatalf("ListAllocations(project) = %v", allocs.GetAllocations())
	}
	got, err := c.GetAllocation(ctx, &adminv1.GetAllocationRequest{Name: def.GetSession().GetAllocation()})
	errdefstest.Must(t, err)
	if got.GetAllocation().GetProject() != defName {
		t.Fatalf("GetAllocation project %q, want %q", got.GetAllocation().GetProject(), defName)
	}
	for _, project := range []string{"", admin.ProjectName.Format(tenant.ID.String(), uuid.NewString())} {
		all, err := c.ListAllocations(ctx, &adminv1.ListAllocationsRequest{Project: project})
		errdefstest.Must(t, err)
		want := 2
		if project != "" {
			want = 0
		}
		if len(all.GetAllocations()) != want {
			t.Fatalf("ListAllocations(%q) = %d allocations, want %d", project, len(all.GetAllocations()), want)
		}
	}

	// A page token is bound to its filter.
	r, err := c.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 1})
	errdefstest.Must(t, err)
	_, err = c.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 1, PageToken: r.GetNextPageToken(), Project: pName})
	admintest.WantInvalidField(t, err, "page_token")
}
