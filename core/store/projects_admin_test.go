package store_test

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/platform/errgrpc"
	"berth.dev/sandbox/errdefs"
)

// wantRefusal fails t unless err is the refusal want (its class, reason
// and message).
func wantRefusal(t testing.TB, err, want error) {
	t.Helper()
	r, ok := errdefs.AsRefusal(err)
	w, _ := errdefs.AsRefusal(want)
	if !ok || w == nil || r.Reason != w.Reason || r.Message != w.Message || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("error %v, want the refusal %v", err, want)
	}
}

// TestProjectRefusalsCrossTheAdminAPI: every refusal of a tenant or
// project write has a reason and a message the admin API lets cross as
// they are (errgrpc.SafeMessage), so the operator reads what to do.
func TestProjectRefusalsCrossTheAdminAPI(t *testing.T) {
	for _, err := range []error{store.ErrRevisionMismatch, store.ErrProjectHasSessions, store.ErrTenantHasProjects} {
		r, ok := errdefs.AsRefusal(err)
		if !ok || !errgrpc.SafeMessage(r.Message) || !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Errorf("%q does not cross as a failed precondition", err)
		}
	}
}

// TestUpdateTenantAndProjectCompareRevision: an update acts only at the
// revision it names (or at any with AnyRevision) and moves it on; a stale
// one, another live name, a project named under another tenant and a
// deleted resource write nothing.
func TestUpdateTenantAndProjectCompareRevision(t *testing.T) {
	st, ctx := ownedStore(t)
	tenant, project := newProject(t, ctx, st)
	ten, err := st.GetTenant(ctx, tenant)
	must(t, err)

	up, err := st.UpdateTenant(ctx, tenant, ten.Revision, "renamed")
	must(t, err)
	if up.DisplayName != "renamed" || up.Revision != ten.Revision+1 || !up.UpdatedAt.After(ten.UpdatedAt) {
		t.Fatalf("updated tenant %+v (was %+v)", up, ten)
	}
	_, err = st.UpdateTenant(ctx, tenant, ten.Revision, "stale")
	wantRefusal(t, err, store.ErrRevisionMismatch)
	_, err = st.UpdateTenant(ctx, tenant, store.AnyRevision, "default")
	wantClass(t, err, errdefs.ErrExists)
	_, err = st.UpdateTenant(ctx, newUUID(t), store.AnyRevision, "x")
	wantClass(t, err, errdefs.ErrNotFound)
	_, err = st.UpdateTenant(ctx, tenant, -1, "x")
	wantClass(t, err, errdefs.ErrInvalid)
	up, err = st.UpdateTenant(ctx, tenant, store.AnyRevision, "again")
	must(t, err)
	if got, _ := st.GetTenant(ctx, tenant); got.DisplayName != "again" || got.Revision != ten.Revision+2 {
		t.Fatalf("tenant after two updates: %+v", got)
	}

	p, err := st.GetProject(ctx, project)
	must(t, err)
	_, _, err = st.CreateProject(ctx, newUUID(t), newUUID(t), tenant, "taken")
	must(t, err)
	_, err = st.UpdateProject(ctx, tenant, project, store.AnyRevision, "taken")
	wantClass(t, err, errdefs.ErrExists)
	_, err = st.UpdateProject(ctx, store.DefaultTenantID, project, p.Revision, "elsewhere")
	wantClass(t, err, errdefs.ErrNotFound)
	pu, err := st.UpdateProject(ctx, tenant, project, p.Revision, "app")
	must(t, err)
	if pu.DisplayName != "app" || pu.Revision != p.Revision+1 {
		t.Fatalf("updated project %+v", pu)
	}
	_, err = st.UpdateProject(ctx, tenant, project, p.Revision, "stale")
	wantRefusal(t, err, store.ErrRevisionMismatch)
	_, err = st.DeleteProject(ctx, tenant, project, p.Revision)
	wantRefusal(t, err, store.ErrRevisionMismatch)

	_, err = st.DeleteProject(ctx, tenant, project, pu.Revision)
	must(t, err)
	_, err = st.UpdateProject(ctx, tenant, project, store.AnyRevision, "gone")
	wantClass(t, err, errdefs.ErrNotFound)
	_, err = st.DeleteProject(ctx, tenant, project, store.AnyRevision)
	wantClass(t, err, errdefs.ErrNotFound)
	// Its name is free again among the tenant's live projects.
	_, _, err = st.CreateProject(ctx, newUUID(t), newUUID(t), tenant, "app")
	must(t, err)
}

// TestDeleteProjectWaitsForItsSessions: a project is refused deletion
// while a Session of it is live, and still while a deleted one's
// allocation is not released; once released the project is deleted, no
// Session can be created in it, and its tenant, refused while the project
// lived, is deleted too, after which no project can be created in it.
func TestDeleteProjectWaitsForItsSessions(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	tenant, project := newProject(t, ctx, st)
	b, err := st.CreateSession(ctx, inProject(t, tenant, project))
	must(t, err)

	_, err = st.DeleteProject(ctx, tenant, project, store.AnyRevision)
	wantRefusal(t, err, store.ErrProjectHasSessions)
	_, err = st.DeleteTenant(ctx, tenant, store.AnyRevision)
	wantRefusal(t, err, store.ErrTenantHasProjects)

	if _, _, err := st.DeleteSession(ctx, b.Session.ID); err != nil {
		t.Fatal(err)
	}
	_, err = st.DeleteProject(ctx, tenant, project, store.AnyRevision)
	wantRefusal(t, err, store.ErrProjectHasSessions)

	a, err := st.GetAllocation(ctx, b.Allocation.ID)
	must(t, err)
	storetest.Release(t, st, a)
	deleted, err := st.DeleteProject(ctx, tenant, project, store.AnyRevision)
	must(t, err)
	if deleted.DeletedAt == nil {
		t.Fatalf("deleted project %+v", deleted)
	}
	_, err = st.CreateSession(ctx, inProject(t, tenant, project))
	wantClass(t, err, store.ErrProjectNotFound)

	ten, err := st.GetTenant(ctx, tenant)
	must(t, err)
	gone, err := st.DeleteTenant(ctx, tenant, ten.Revision)
	must(t, err)
	if gone.DeletedAt == nil || gone.Revision != ten.Revision+1 {
		t.Fatalf("deleted tenant %+v", gone)
	}
	_, err = st.DeleteTenant(ctx, tenant, store.AnyRevision)
	wantClass(t, err, errdefs.ErrNotFound)
	_, err = st.UpdateTenant(ctx, tenant, store.AnyRevision, "gone")
	wantClass(t, err, errdefs.ErrNotFound)
	_, _, err = st.CreateProject(ctx, newUUID(t), newUUID(t), tenant, "late")
	wantClass(t, err, errdefs.ErrNotFound)
}

// TestDefaultTenantAndProjectCanBeDeleted: the rows migration 0022 made
// are deleted like any other once empty.
func TestDefaultTenantAndProjectCanBeDeleted(t *testing.T) {
	st, ctx := ownedStore(t)
	_, err := st.DeleteTenant(ctx, store.DefaultTenantID, store.AnyRevision)
	wantRefusal(t, err, store.ErrTenantHasProjects)
	_, err = st.DeleteProject(ctx, store.DefaultTenantID, store.DefaultProjectID, store.AnyRevision)
	must(t, err)
	_, err = st.DeleteTenant(ctx, store.DefaultTenantID, store.AnyRevision)
	must(t, err)
	_, err = st.CreateSession(ctx, sessionParams(t, 50))
	wantClass(t, err, store.ErrProjectNotFound)
}

// byAge orders rows as the by-age listings do: creation time, then id.
func byAge[T any](at func(T) (createdAt int64, id uuid.UUID)) func(a, b T) int {
	return func(a, b T) int {
		ta, ia := at(a)
		tb, ib := at(b)
		if ta != tb {
			if ta < tb {
				return -1
			}
			return 1
		}
		return bytes.Compare(ia[:], ib[:])
	}
}

// TestListTenantsAndProjectsByAge: both listings page in creation order,
// leave deleted rows out, and a tenant's lists only its own projects.
func TestListTenantsAndProjectsByAge(t *testing.T) {
	st, ctx := ownedStore(t)
	const size = 2
	tenants := []store.Tenant{}
	def, err := st.GetTenant(ctx, store.DefaultTenantID)
	must(t, err)
	tenants = append(tenants, def)
	for range 4 {
		ten, _, err := st.CreateTenant(ctx, newUUID(t), newUUID(t), "t-"+newUUID(t).String()[:8])
		must(t, err)
		tenants = append(tenants, ten)
	}
	tenantAge := byAge(func(x store.Tenant) (int64, uuid.UUID) { return x.CreatedAt.UnixMicro(), x.ID })
	slices.SortFunc(tenants, tenantAge)
	listTenants := func() ([]uuid.UUID, []int) {
		return pagedIDs(t, size, func(after store.TenantCursor) ([]store.Tenant, error) {
			return st.ListTenantsByAge(ctx, size, after)
		}, func(last store.Tenant) store.TenantCursor {
			return store.TenantCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		}, func(ts []store.Tenant) []uuid.UUID {
			return idsOf(ts, func(x store.Tenant) uuid.UUID { return x.ID })
		})
	}
	want := idsOf(tenants, func(x store.Tenant) uuid.UUID { return x.ID })
	got, sizes := listTenants()
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Fatalf("tenants %v in pages %v, want %v in [2 2 1]", got, sizes, want)
	}
	gone := tenants[2].ID
	_, err = st.DeleteTenant(ctx, gone, store.AnyRevision)
	must(t, err)
	if got, _ := listTenants(); !slices.Equal(got, slices.DeleteFunc(slices.Clone(want), func(id uuid.UUID) bool { return id == gone })) {
		t.Fatalf("tenants after a deletion: %v", got)
	}

	owner := tenants[1].ID
	var projects []store.Project
	for range 5 {
		p, _, err := st.CreateProject(ctx, newUUID(t), newUUID(t), owner, "p-"+newUUID(t).String()[:8])
		must(t, err)
		projects = append(projects, p)
	}
	_, _, err = st.CreateProject(ctx, newUUID(t), newUUID(t), tenants[3].ID, "elsewhere")
	must(t, err)
	_, err = st.DeleteProject(ctx, owner, projects[1].ID, store.AnyRevision)
	must(t, err)
	projects = slices.Delete(projects, 1, 2)
	slices.SortFunc(projects, byAge(func(x store.Project) (int64, uuid.UUID) { return x.CreatedAt.UnixMicro(), x.ID }))
	gotP, sizes := pagedIDs(t, size, func(after store.ProjectCursor) ([]store.Project, error) {
		return st.ListProjectsByAge(ctx, owner, size, after)
	}, func(last store.Project) store.ProjectCursor {
		return store.ProjectCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}, func(ps []store.Project) []uuid.UUID {
		return idsOf(ps, func(x store.Project) uuid.UUID { return x.ID })
	})
	wantP := idsOf(projects, func(x store.Project) uuid.UUID { return x.ID })
	if !slices.Equal(gotP, wantP) || !slices.Equal(sizes, []int{2, 2, 0}) {
		t.Fatalf("projects %v in pages %v, want %v in [2 2 0]", gotP, sizes, wantP)
	}
	for _, n := range []int{0, store.MaxPageSize + 2} {
		_, err = st.ListTenantsByAge(ctx, n, store.TenantCursor{})
		wantClass(t, err, errdefs.ErrInvalid)
		_, err = st.ListProjectsByAge(ctx, owner, n, store.ProjectCursor{})
		wantClass(t, err, errdefs.ErrInvalid)
	}
}

// TestDeleteProjectRacesCreateSession: a CreateSession and a
// DeleteProject of the same project, started together many times, never
// both succeed: either the Session was committed first and the deletion
// is refused, or the deletion was and the Session is ErrProjectNotFound.
// No Session is ever left in a deleted project.
func TestDeleteProjectRacesCreateSession(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	tenant := newUUID(t)
	_, _, err := st.CreateTenant(ctx, newUUID(t), tenant, "race")
	must(t, err)
	outcomes := map[string]int{}
	for i := range 24 {
		p, _, err := st.CreateProject(ctx, newUUID(t), newUUID(t), tenant, "p-"+newUUID(t).String()[:8])
		must(t, err)
		var (
			wg        sync.WaitGroup
			createErr error
			deleteErr error
		)
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, createErr = st.CreateSession(ctx, inProject(t, tenant, p.ID))
		}()
		go func() {
			defer wg.Done()
			<-start
			_, deleteErr = st.DeleteProject(ctx, tenant, p.ID, store.AnyRevision)
		}()
		close(start)
		wg.Wait()
		switch {
		case createErr == nil && errors.Is(deleteErr, store.ErrProjectHasSessions):
			outcomes["session first"]++
		case deleteErr == nil && errors.Is(createErr, store.ErrProjectNotFound):
			outcomes["deletion first"]++
		default:
			t.Fatalf("round %d: create %v, delete %v", i, createErr, deleteErr)
		}
		var inDeleted int
		err = st.Pool().QueryRow(ctx, `SELECT count(*) FROM sessions s JOIN projects p ON p.id = s.project_id
			WHERE p.deleted_at IS NOT NULL`).Scan(&inDeleted)
		must(t, err)
		if inDeleted != 0 {
			t.Fatalf("round %d: %d Sessions in deleted projects", i, inDeleted)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestDeleteTenantRacesCreateProject: as for a project and its Sessions,
// a CreateProject and a DeleteTenant started together never both succeed,
// so no live project is ever left in a deleted tenant.
func TestDeleteTenantRacesCreateProject(t *testing.T) {
	st, ctx := ownedStore(t)
	outcomes := map[string]int{}
	for i := range 24 {
		ten, _, err := st.CreateTenant(ctx, newUUID(t), newUUID(t), "t-"+newUUID(t).String()[:8])
		must(t, err)
		var (
			wg                   sync.WaitGroup
			createErr, deleteErr error
		)
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, _, createErr = st.CreateProject(ctx, newUUID(t), newUUID(t), ten.ID, "p")
		}()
		go func() {
			defer wg.Done()
			<-start
			_, deleteErr = st.DeleteTenant(ctx, ten.ID, store.AnyRevision)
		}()
		close(start)
		wg.Wait()
		switch {
		case createErr == nil && errors.Is(deleteErr, store.ErrTenantHasProjects):
			outcomes["project first"]++
		case deleteErr == nil && errors.Is(createErr, errdefs.ErrNotFound):
			outcomes["deletion first"]++
		default:
			t.Fatalf("round %d: create %v, delete %v", i, createErr, deleteErr)
		}
		var orphans int
		err = st.Pool().QueryRow(ctx, `SELECT count(*) FROM projects p JOIN tenants t ON t.id = p.tenant_id
			WHERE p.deleted_at IS NULL AND t.deleted_at IS NOT NULL`).Scan(&orphans)
		must(t, err)
		if orphans != 0 {
			t.Fatalf("round %d: %d live projects in deleted tenants", i, orphans)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
