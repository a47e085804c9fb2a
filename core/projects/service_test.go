package projects_test

import (
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestNewServiceRefusesMissingParts: no store or no id source is a
// composition fault, refused at once.
func TestNewServiceRefusesMissingParts(t *testing.T) {
	if _, err := projects.NewService(nil, uuid.New); err == nil {
		t.Error("no store accepted")
	}
	if _, err := projects.NewService(&storetest.Store{}, nil); err == nil {
		t.Error("no id source accepted")
	}
}

// TestDeletedAndMisparentedAreNotFound: the Service's reads answer
// ErrNotFound for a deleted tenant or project and for a project read under
// another tenant, exactly as for a missing one; a deleted tenant's
// projects are not listed as empty but ErrNotFound. New ids come from
// newID.
func TestDeletedAndMisparentedAreNotFound(t *testing.T) {
	st, ctx := storetest.Parallel(t)
	ids := []uuid.UUID{uuid.New(), uuid.New()}
	next := 0
	svc, err := projects.NewService(st, func() uuid.UUID { next++; return ids[next-1] })
	errdefstest.Must(t, err)
	ten, err := svc.CreateTenant(ctx, uuid.New(), "team")
	errdefstest.Must(t, err)
	p, err := svc.CreateProject(ctx, uuid.New(), ten.ID, "app")
	errdefstest.Must(t, err)
	if ten.ID != ids[0] || p.ID != ids[1] {
		t.Fatalf("ids %v, %v, want %v", ten.ID, p.ID, ids)
	}
	_, err = svc.GetProject(ctx, store.DefaultTenantID, p.ID)
	errdefstest.WantClass(t, err, errdefs.ErrNotFound)
	_, err = svc.DeleteProject(ctx, ten.ID, p.ID, projects.AnyRevision)
	errdefstest.Must(t, err)
	_, err = svc.GetProject(ctx, ten.ID, p.ID)
	errdefstest.WantClass(t, err, errdefs.ErrNotFound)
	_, err = svc.DeleteTenant(ctx, ten.ID, projects.AnyRevision)
	errdefstest.Must(t, err)
	_, err = svc.GetTenant(ctx, ten.ID)
	errdefstest.WantClass(t, err, errdefs.ErrNotFound)
	_, err = svc.ListProjects(ctx, ten.ID, store.ProjectCursor{}, 10)
	errdefstest.WantClass(t, err, errdefs.ErrNotFound)
}
