package sessions_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/projects"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/sandbox/errdefs"
)

// newProject creates a project of a new tenant.
func (f fixture) newProject(t *testing.T, name string) store.Project {
	t.Helper()
	tenant, _, err := f.St.CreateTenant(f.Ctx, uuid.New(), uuid.New(), "tenant-"+name)
	must(t, err)
	p, _, err := f.St.CreateProject(f.Ctx, uuid.New(), uuid.New(), tenant.ID, name)
	must(t, err)
	return p
}

// wantNotFound fails unless err is errdefs.ErrNotFound.
func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("%s: %v, want not found", what, err)
	}
}

// TestScopeSeesOnlyItsProject: in one project's scope another project's
// Session is not found by any entry, exactly as a missing one is, and it
// is left as it was; the administrator's scope sees both.
func TestScopeSeesOnlyItsProject(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	a, b := f.newProject(t, "a"), f.newProject(t, "b")
	inA := projects.In(a.ID)

	mine, err := f.Svc.Create(f.Ctx, inA, sessions.CreateRequest{RequestID: uuid.New()})
	must(t, err)
	if mine.Session.ProjectID != a.ID || mine.Session.TenantID != a.TenantID {
		t.Fatalf("created in project %s tenant %s, want %s %s", mine.Session.ProjectID, mine.Session.TenantID, a.ID, a.TenantID)
	}
	theirs, err := f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), ProjectID: b.ID, TenantID: b.TenantID})
	must(t, err)
	if theirs.Session.ProjectID != b.ID || theirs.Session.TenantID != b.TenantID {
		t.Fatalf("admin create landed in %s", theirs.Session.ProjectID)
	}

	for _, id := range []uuid.UUID{theirs.Session.ID, uuid.New()} {
		_, err := f.Svc.Get(f.Ctx, inA, id)
		wantNotFound(t, "Get", err)
		_, err = f.Svc.Delete(f.Ctx, inA, id)
		wantNotFound(t, "Delete", err)
		_, err = f.Svc.Suspend(f.Ctx, inA, id, uuid.New())
		wantNotFound(t, "Suspend", err)
		_, err = f.Svc.Resume(f.Ctx, inA, id, uuid.New())
		wantNotFound(t, "Resume", err)
	}
	got, err := f.Svc.Get(f.Ctx, projects.All(), theirs.Session.ID)
	must(t, err)
	if got.Session.DeleteRequestedAt != nil {
		t.Fatal("a scoped Delete of another project's Session deleted it")
	}
	if _, err := f.Svc.Get(f.Ctx, inA, mine.Session.ID); err != nil {
		t.Fatalf("Get of its own Session: %v", err)
	}

	list, err := f.Svc.List(f.Ctx, inA, store.AgeCursor{}, 10, true)
	must(t, err)
	if len(list) != 1 || list[0].Session.ID != mine.Session.ID {
		t.Fatalf("scoped List = %d Sessions, want only its own", len(list))
	}
	all, err := f.Svc.List(f.Ctx, projects.All(), store.AgeCursor{}, 10, true)
	must(t, err)
	if len(all) != 2 {
		t.Fatalf("admin List = %d Sessions, want 2", len(all))
	}

	// The zero scope fails every entry instead of widening.
	var zero projects.Scope
	if _, err := f.Svc.Get(f.Ctx, zero, mine.Session.ID); err == nil {
		t.Fatal("Get with the zero scope")
	}
	if _, err := f.Svc.List(f.Ctx, zero, store.AgeCursor{}, 10, true); err == nil {
		t.Fatal("List with the zero scope")
	}
	if _, err := f.Svc.Create(f.Ctx, zero, sessions.CreateRequest{RequestID: uuid.New()}); err == nil {
		t.Fatal("Create with the zero scope")
	}
}

// TestCreateResolvesTheProject: a project the scope does not see, one of
// another tenant than named, a missing and a deleted one are the same
// not-found and create nothing; with no project named, the administrator
// gets the default project, and once that is deleted an invalid
// "project".
func TestCreateResolvesTheProject(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	a, b := f.newProject(t, "a"), f.newProject(t, "b")
	gone := f.newProject(t, "gone")
	_, err := f.St.Pool().Exec(f.Ctx, `UPDATE projects SET deleted_at = now() WHERE id = $1`, gone.ID)
	must(t, err)

	for name, c := range map[string]struct {
		scope projects.Scope
		req   sessions.CreateRequest
	}{
		"another project":     {projects.In(a.ID), sessions.CreateRequest{ProjectID: b.ID}},
		"another tenant":      {projects.All(), sessions.CreateRequest{ProjectID: a.ID, TenantID: b.TenantID}},
		"missing":             {projects.All(), sessions.CreateRequest{ProjectID: uuid.New()}},
		"deleted":             {projects.All(), sessions.CreateRequest{ProjectID: gone.ID}},
		"deleted, own scope":  {projects.In(gone.ID), sessions.CreateRequest{}},
		"missing, own scope":  {projects.In(uuid.New()), sessions.CreateRequest{}},
		"narrowed to nothing": {projects.None(), sessions.CreateRequest{}},
	} {
		c.req.RequestID = uuid.New()
		_, err := f.Svc.Create(f.Ctx, c.scope, c.req)
		if !errors.Is(err, store.ErrProjectNotFound) {
			t.Errorf("%s: %v, want project not found", name, err)
		}
	}
	all, err := f.Svc.List(f.Ctx, projects.All(), store.AgeCursor{}, 10, true)
	must(t, err)
	if len(all) != 0 {
		t.Fatalf("refused creates left %d Sessions", len(all))
	}

	def, err := f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New()})
	must(t, err)
	if def.Session.ProjectID != store.DefaultProjectID || def.Session.TenantID != store.DefaultTenantID {
		t.Fatalf("unnamed project: %s, want the default", def.Session.ProjectID)
	}
	_, err = f.St.Pool().Exec(f.Ctx, `UPDATE projects SET deleted_at = now() WHERE id = $1`, store.DefaultProjectID)
	must(t, err)
	_, err = f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New()})
	wantField(t, err, "project")
}

// TestNarrow: a filter by project name narrows to that project only when
// it exists, is live and is of the named tenant; anything else lists
// nothing.
func TestNarrow(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	a, b := f.newProject(t, "a"), f.newProject(t, "b")
	_, err := f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), ProjectID: a.ID})
	must(t, err)
	_, err = f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), ProjectID: b.ID})
	must(t, err)
	count := func(s projects.Scope) int {
		list, err := f.Svc.List(f.Ctx, s, store.AgeCursor{}, 10, true)
		must(t, err)
		return len(list)
	}
	for name, c := range map[string]struct {
		scope           projects.Scope
		tenant, project uuid.UUID
		want            int
	}{
		"admin, a":            {projects.All(), a.TenantID, a.ID, 1},
		"admin, wrong tenant": {projects.All(), b.TenantID, a.ID, 0},
		"admin, missing":      {projects.All(), a.TenantID, uuid.New(), 0},
		"in a, a":             {projects.In(a.ID), a.TenantID, a.ID, 1},
		"in a, b":             {projects.In(a.ID), b.TenantID, b.ID, 0},
	} {
		s, err := f.Svc.Narrow(f.Ctx, c.scope, c.tenant, c.project)
		must(t, err)
		if got := count(s); got != c.want {
			t.Errorf("%s: lists %d, want %d", name, got, c.want)
		}
	}
}
