package projectadmin_test

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/projectadmin"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// fixture is a real admin server serving ProjectService over a real,
// migrated store, and a client of it.
type fixture struct {
	adminv1.ProjectServiceClient
	st    *storetest.Store
	ctx   context.Context // carries the admin token
	plain context.Context // carries none
	token string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	st, ctx := storetest.Parallel(t)
	svc, err := projects.NewService(st, uuid.New)
	errdefstest.Must(t, err)
	key := make([]byte, admin.MinPageTokenKeyBytes)
	_, err = rand.Read(key)
	errdefstest.Must(t, err)
	pages, err := admin.NewPageTokens(key)
	errdefstest.Must(t, err)
	keys, err := projects.NewKeys(st)
	errdefstest.Must(t, err)
	srv, err := projectadmin.New(svc, keys, pages)
	errdefstest.Must(t, err)
	cc, token := admintest.Serve(t, admin.Options{Services: []admin.Service{srv}})
	return fixture{
		ProjectServiceClient: adminv1.NewProjectServiceClient(cc), st: st,
		ctx: admintest.Authed(ctx, token), plain: ctx, token: token,
	}
}

func (f fixture) tenant(t *testing.T, name string) *adminv1.Tenant {
	t.Helper()
	got, err := f.CreateTenant(f.ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: name}})
	errdefstest.Must(t, err)
	return got.GetTenant()
}

func (f fixture) project(t *testing.T, parent, name string) *adminv1.Project {
	t.Helper()
	got, err := f.CreateProject(f.ctx, &adminv1.CreateProjectRequest{
		Parent: parent, RequestId: uuid.NewString(), Project: &adminv1.Project{DisplayName: name},
	})
	errdefstest.Must(t, err)
	return got.GetProject()
}

// wantRefusal fails t unless err is FAILED_PRECONDITION with reason and
// exactly message.
func wantRefusal(t *testing.T, err error, reason, message string) {
	t.Helper()
	if s := admintest.WantStatus(t, err, codes.FailedPrecondition, admin.Reason(reason)); s.Message() != message {
		t.Fatalf("%s: message %q, want %q", reason, s.Message(), message)
	}
}

func TestGRPCRefusesUnauthenticated(t *testing.T) {
	f := newFixture(t)
	admintest.WantUnauthenticated(t, f.plain, f.token, func(ctx context.Context) []error {
		_, createErr := f.CreateTenant(ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "x"}})
		_, listErr := f.ListTenants(ctx, &adminv1.ListTenantsRequest{})
		_, deleteErr := f.DeleteProject(ctx, &adminv1.DeleteProjectRequest{
			Name: admin.ProjectName.Format(store.DefaultTenantID.String(), store.DefaultProjectID.String()),
		})
		return []error{createErr, listErr, deleteErr}
	})
	if _, err := f.st.GetProject(f.plain, store.DefaultProjectID); err != nil {
		t.Fatal(err)
	}
	page, err := f.st.ListTenantsByAge(f.plain, 10, store.TenantCursor{})
	errdefstest.Must(t, err)
	if len(page) != 1 {
		t.Fatalf("unauthenticated calls left %d tenants", len(page))
	}
}

// TestGRPCCreateAndGet: a create answers the resource with its name,
// times and etag; a retry with the same request_id returns it again
// (another display name under it is ALREADY_EXISTS); output-only fields,
// malformed names and request ids are INVALID_ARGUMENT naming the field;
// a project read under another tenant's name is NOT_FOUND.
func TestGRPCCreateAndGet(t *testing.T) {
	f := newFixture(t)
	req := &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "team"}}
	first, err := f.CreateTenant(f.ctx, req)
	errdefstest.Must(t, err)
	ten := first.GetTenant()
	if _, err := admin.ValidateName("name", ten.GetName(), admin.TenantName); err != nil || ten.GetDisplayName() != "team" ||
		ten.GetCreateTime() == nil || ten.GetUpdateTime() == nil || ten.GetEtag() != "1" {
		t.Fatalf("created %v", ten)
	}
	again, err := f.CreateTenant(f.ctx, req)
	errdefstest.Must(t, err)
	if again.GetTenant().GetName() != ten.GetName() {
		t.Fatalf("retry created %v", again.GetTenant())
	}
	req.Tenant.DisplayName = "other"
	_, err = f.CreateTenant(f.ctx, req)
	admintest.WantStatus(t, err, codes.AlreadyExists, admin.ReasonExists)
	_, err = f.CreateTenant(f.ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "team"}})
	admintest.WantStatus(t, err, codes.AlreadyExists, admin.ReasonExists)
	_, err = f.CreateTenant(f.ctx, &adminv1.CreateTenantRequest{RequestId: "x", Tenant: &adminv1.Tenant{DisplayName: "y"}})
	admintest.WantInvalidField(t, err, "request_id")
	_, err = f.CreateTenant(f.ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{Name: ten.GetName(), DisplayName: "y"}})
	admintest.WantInvalidField(t, err, "tenant.name")
	_, err = f.CreateTenant(f.ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "a\x01b"}})
	admintest.WantInvalidField(t, err, "tenant.display_name")

	got, err := f.GetTenant(f.ctx, &adminv1.GetTenantRequest{Name: ten.GetName()})
	errdefstest.Must(t, err)
	if got.GetTenant().GetName() != ten.GetName() || got.GetTenant().GetEtag() != "1" {
		t.Fatalf("got %v", got.GetTenant())
	}
	_, err = f.GetTenant(f.ctx, &adminv1.GetTenantRequest{Name: "tenants/" + uuid.NewString()})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	_, err = f.GetTenant(f.ctx, &adminv1.GetTenantRequest{Name: "tenants/team"})
	admintest.WantInvalidField(t, err, "name")

	preq := &adminv1.CreateProjectRequest{Parent: ten.GetName(), RequestId: uuid.NewString(), Project: &adminv1.Project{DisplayName: "app"}}
	created, err := f.CreateProject(f.ctx, preq)
	errdefstest.Must(t, err)
	p := created.GetProject()
	if !strings.HasPrefix(p.GetName(), ten.GetName()+"/projects/") || p.GetDisplayName() != "app" || p.GetEtag() != "1" {
		t.Fatalf("created %v", p)
	}
	retry, err := f.CreateProject(f.ctx, preq)
	errdefstest.Must(t, err)
	if retry.GetProject().GetName() != p.GetName() {
		t.Fatalf("retry created %v", retry.GetProject())
	}
	_, err = f.CreateProject(f.ctx, &adminv1.CreateProjectRequest{Parent: "tenants/" + uuid.NewString(), RequestId: uuid.NewString(), Project: &adminv1.Project{DisplayName: "app"}})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	_, err = f.CreateProject(f.ctx, &adminv1.CreateProjectRequest{Parent: ten.GetName(), RequestId: uuid.NewString(), Project: &adminv1.Project{DisplayName: "b", CreateTime: timestamppb.Now()}})
	admintest.WantInvalidField(t, err, "project.create_time")

	gotP, err := f.GetProject(f.ctx, &adminv1.GetProjectRequest{Name: p.GetName()})
	errdefstest.Must(t, err)
	if gotP.GetProject().GetName() != p.GetName() {
		t.Fatalf("got %v", gotP.GetProject())
	}
	// The project's id under the default tenant's name: as if missing.
	elsewhere := admin.TenantName.Format(store.DefaultTenantID.String()) + "/projects/" + p.GetName()[strings.LastIndex(p.GetName(), "/")+1:]
	_, err = f.GetProject(f.ctx, &adminv1.GetProjectRequest{Name: elsewhere})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	_, err = f.DeleteProject(f.ctx, &adminv1.DeleteProjectRequest{Name: elsewhere})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
}

// TestGRPCListPaged: both lists page in creation order with page tokens
// that are refused by the other list or for another parent, and leave
// deleted rows out.
func TestGRPCListPaged(t *testing.T) {
	f := newFixture(t)
	want := []string{admin.TenantName.Format(store.DefaultTenantID.String())}
	for i := range 4 {
		want = append(want, f.tenant(t, "t"+string(rune('a'+i))).GetName())
	}
	list := func() ([]string, int) {
		return admintest.Pages(t, func(token string) ([]*adminv1.Tenant, string, error) {
			r, err := f.ListTenants(f.ctx, &adminv1.ListTenantsRequest{PageSize: 2, PageToken: token})
			return r.GetTenants(), r.GetNextPageToken(), err
		})
	}
	got, pages := list()
	if !slices.Equal(got, want) || pages != 3 {
		t.Fatalf("listed %v in %d pages, want %v in 3", got, pages, want)
	}
	_, err := f.DeleteTenant(f.ctx, &adminv1.DeleteTenantRequest{Name: want[2]})
	errdefstest.Must(t, err)
	if got, _ := list(); !slices.Equal(got, slices.Delete(slices.Clone(want), 2, 3)) {
		t.Fatalf("after a deletion: %v", got)
	}

	parent := want[1]
	var projectsWant []string
	for i := range 3 {
		projectsWant = append(projectsWant, f.project(t, parent, "p"+string(rune('a'+i))).GetName())
	}
	f.project(t, want[3], "elsewhere")
	first, err := f.ListProjects(f.ctx, &adminv1.ListProjectsRequest{Parent: parent, PageSize: 1})
	errdefstest.Must(t, err)
	_, err = f.ListProjects(f.ctx, &adminv1.ListProjectsRequest{Parent: want[3], PageSize: 1, PageToken: first.GetNextPageToken()})
	admintest.WantInvalidField(t, err, "page_token")
	_, err = f.ListTenants(f.ctx, &adminv1.ListTenantsRequest{PageToken: first.GetNextPageToken()})
	admintest.WantInvalidField(t, err, "page_token")
	gotP, pages := admintest.Pages(t, func(token string) ([]*adminv1.Project, string, error) {
		r, err := f.ListProjects(f.ctx, &adminv1.ListProjectsRequest{Parent: parent, PageSize: 1, PageToken: token})
		return r.GetProjects(), r.GetNextPageToken(), err
	})
	if !slices.Equal(gotP, projectsWant) || pages != 3 {
		t.Fatalf("listed %v in %d pages, want %v in 3", gotP, pages, projectsWant)
	}
	_, err = f.ListProjects(f.ctx, &adminv1.ListProjectsRequest{Parent: want[2]})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
}

// TestGRPCUpdateWithEtag: an update at the current etag renames and moves
// the etag on; the old etag is then refused etag_mismatch with its fixed
// message; an empty etag updates at any revision; an etag not of the
// service's form and a mask naming another field are INVALID_ARGUMENT.
func TestGRPCUpdateWithEtag(t *testing.T) {
	f := newFixture(t)
	ten := f.tenant(t, "team")
	up, err := f.UpdateTenant(f.ctx, &adminv1.UpdateTenantRequest{
		Tenant: &adminv1.Tenant{Name: ten.GetName(), DisplayName: "renamed"}, Etag: ten.GetEtag(),
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name"}},
	})
	errdefstest.Must(t, err)
	if up.GetTenant().GetDisplayName() != "renamed" || up.GetTenant().GetEtag() != "2" {
		t.Fatalf("updated %v", up.GetTenant())
	}
	const stale = "the etag is stale: read the resource again, then retry"
	_, err = f.UpdateTenant(f.ctx, &adminv1.UpdateTenantRequest{Tenant: &adminv1.Tenant{Name: ten.GetName(), DisplayName: "late"}, Etag: ten.GetEtag()})
	wantRefusal(t, err, "etag_mismatch", stale)
	_, err = f.UpdateTenant(f.ctx, &adminv1.UpdateTenantRequest{Tenant: &adminv1.Tenant{Name: ten.GetName(), DisplayName: "late"}, Etag: "W/1"})
	admintest.WantInvalidField(t, err, "etag")
	_, err = f.UpdateTenant(f.ctx, &adminv1.UpdateTenantRequest{
		Tenant: &adminv1.Tenant{Name: ten.GetName(), DisplayName: "late"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name"}},
	})
	admintest.WantInvalidField(t, err, "update_mask")
	_, err = f.UpdateTenant(f.ctx, &adminv1.UpdateTenantRequest{Tenant: &adminv1.Tenant{Name: ten.GetName()}})
	admintest.WantInvalidField(t, err, "tenant.display_name")
	anyRev, err := f.UpdateTenant(f.ctx, &adminv1.UpdateTenantRequest{Tenant: &adminv1.Tenant{Name: ten.GetName(), DisplayName: "third"}})
	errdefstest.Must(t, err)
	if anyRev.GetTenant().GetEtag() != "3" {
		t.Fatalf("updated without an etag: %v", anyRev.GetTenant())
	}

	p := f.project(t, ten.GetName(), "app")
	pu, err := f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{Project: &adminv1.Project{Name: p.GetName(), DisplayName: "web"}, Etag: p.GetEtag()})
	errdefstest.Must(t, err)
	if pu.GetProject().GetDisplayName() != "web" || pu.GetProject().GetEtag() != "2" {
		t.Fatalf("updated %v", pu.GetProject())
	}
	_, err = f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{Project: &adminv1.Project{Name: p.GetName(), DisplayName: "x"}, Etag: p.GetEtag()})
	wantRefusal(t, err, "etag_mismatch", stale)
	_, err = f.DeleteProject(f.ctx, &adminv1.DeleteProjectRequest{Name: p.GetName(), Etag: p.GetEtag()})
	wantRefusal(t, err, "etag_mismatch", stale)
}

// TestGRPCDelete: the default project holding a Session is refused
// project_has_sessions and its tenant tenant_has_projects, each with its
// exact message; once the Session is deleted and its compute released
// both are deleted, and every call naming them is then NOT_FOUND.
func TestGRPCDelete(t *testing.T) {
	f := newFixture(t)
	owned := storetest.Owner(t, f.st)
	b, _ := storetest.RunningSession(t, owned)
	tenant := admin.TenantName.Format(store.DefaultTenantID.String())
	project := admin.ProjectName.Format(store.DefaultTenantID.String(), store.DefaultProjectID.String())

	_, err := f.DeleteProject(f.ctx, &adminv1.DeleteProjectRequest{Name: project})
	wantRefusal(t, err, "project_has_sessions", "the project still has Sessions: delete them, then retry")
	_, err = f.DeleteTenant(f.ctx, &adminv1.DeleteTenantRequest{Name: tenant})
	wantRefusal(t, err, "tenant_has_projects", "the tenant still has projects: delete them, then retry")

	_, _, err = owned.DeleteSession(f.plain, b.Session.ID)
	errdefstest.Must(t, err)
	_, err = f.DeleteProject(f.ctx, &adminv1.DeleteProjectRequest{Name: project})
	wantRefusal(t, err, "project_has_sessions", "the project still has Sessions: delete them, then retry")
	a, err := f.st.GetAllocation(f.plain, b.Allocation.ID)
	errdefstest.Must(t, err)
	storetest.Release(t, owned, a)

	got, err := f.GetProject(f.ctx, &adminv1.GetProjectRequest{Name: project})
	errdefstest.Must(t, err)
	deleted, err := f.DeleteProject(f.ctx, &adminv1.DeleteProjectRequest{Name: project, Etag: got.GetProject().GetEtag()})
	errdefstest.Must(t, err)
	if deleted.GetProject().GetName() != project {
		t.Fatalf("deleted %v", deleted.GetProject())
	}
	_, err = f.DeleteTenant(f.ctx, &adminv1.DeleteTenantRequest{Name: tenant})
	errdefstest.Must(t, err)

	notFound := []error{}
	_, err = f.GetProject(f.ctx, &adminv1.GetProjectRequest{Name: project})
	notFound = append(notFound, err)
	_, err = f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{Project: &adminv1.Project{Name: project, DisplayName: "x"}})
	notFound = append(notFound, err)
	_, err = f.DeleteProject(f.ctx, &adminv1.DeleteProjectRequest{Name: project})
	notFound = append(notFound, err)
	_, err = f.GetTenant(f.ctx, &adminv1.GetTenantRequest{Name: tenant})
	notFound = append(notFound, err)
	_, err = f.UpdateTenant(f.ctx, &adminv1.UpdateTenantRequest{Tenant: &adminv1.Tenant{Name: tenant, DisplayName: "x"}})
	notFound = append(notFound, err)
	_, err = f.DeleteTenant(f.ctx, &adminv1.DeleteTenantRequest{Name: tenant})
	notFound = append(notFound, err)
	_, err = f.ListProjects(f.ctx, &adminv1.ListProjectsRequest{Parent: tenant})
	notFound = append(notFound, err)
	for _, err := range notFound {
		admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	}
	listed, err := f.ListTenants(f.ctx, &adminv1.ListTenantsRequest{})
	errdefstest.Must(t, err)
	if len(listed.GetTenants()) != 0 {
		t.Fatalf("listed %v after deleting the only tenant", listed.GetTenants())
	}
}
