package sessions_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/projects"
	"berth.dev/core/sessions"
	"berth.dev/core/sessions/sessionstest"
	"berth.dev/core/store"
	"berth.dev/platform/errgrpc"
	"berth.dev/sandbox/errdefs"
)

func TestDisabledProviderRefusesCreationOnly(t *testing.T) {
	f := sessionstest.New(t)
	f.Deploy(t, 5)
	first := sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "before"}
	b, err := f.Svc.Create(f.Ctx, projects.All(), first)
	must(t, err)

	_, err = f.St.SetProviderDisabled(f.Ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	_, err = f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project})
	r, ok := errdefs.AsRefusal(err)
	if !errors.Is(err, store.ErrProviderDisabled) || !errors.Is(err, errdefs.ErrFailedPrecondition) || !ok ||
		r.Reason != "provider_disabled" || r.Message != "the sandbox provider is disabled: enable it with DeploymentService.EnableProvider" {
		t.Fatalf("create while disabled: %v", err)
	}
	// A retry of the committed request still answers with its Session.
	again, err := f.Svc.Create(f.Ctx, projects.All(), first)
	must(t, err)
	if again.Session.ID != b.Session.ID || again.Created {
		t.Fatalf("retry while disabled: %+v", again.Session)
	}
	// Reads and deletion are never blocked.
	if _, err := f.Svc.Get(f.Ctx, projects.All(), b.Session.ID); err != nil {
		t.Fatalf("get while disabled: %v", err)
	}
	told := f.Bus.Subscribe(events.Event{Kind: events.Session, ID: b.Session.ID})
	defer told.Close()
	deleted, err := f.Svc.Delete(f.Ctx, projects.All(), b.Session.ID)
	must(t, err)
	if got := told.Take(); len(got) != 1 {
		t.Fatalf("the deletion published %v, want its Session", got)
	}
	if deleted.Session.State != store.SessionDeleteRequested ||
		deleted.Allocation.State != store.AllocationCleanupRequested ||
		deleted.Environment.TerminalCause != store.TerminalDeleted {
		t.Fatalf("deleted while disabled: %+v", deleted)
	}

	_, err = f.St.SetProviderDisabled(f.Ctx, false, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	if _, err := f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project}); err != nil {
		t.Fatalf("create after enabling: %v", err)
	}
}

// TestClosedAdmissionRefusesCreationOnly: after CloseAdmission (an owner
// failure) every Create is refused with the fixed owner_failure reason
// and writes nothing; reads and deletion go on.
func TestClosedAdmissionRefusesCreationOnly(t *testing.T) {
	f := sessionstest.New(t)
	f.Deploy(t, 5)
	b, err := f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project})
	must(t, err)
	f.Svc.CloseAdmission()
	_, err = f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project})
	r, ok := errdefs.AsRefusal(err)
	if !ok || r.Reason != "owner_failure" || !errgrpc.SafeMessage(r.Message) || !errors.Is(err, errdefs.ErrFailedPrecondition) || !errors.Is(err, sessions.ErrAdmissionClosed) {
		t.Fatalf("create after CloseAdmission: %v", err)
	}
	page, err := f.Svc.List(f.Ctx, projects.All(), store.AgeCursor{}, 10, true)
	must(t, err)
	if len(page) != 1 || page[0].Session.ID != b.Session.ID {
		t.Fatalf("after a refused create there are %d Sessions, want the first only", len(page))
	}
	if _, err := f.Svc.Delete(f.Ctx, projects.All(), b.Session.ID); err != nil {
		t.Fatalf("delete after CloseAdmission: %v", err)
	}
}
