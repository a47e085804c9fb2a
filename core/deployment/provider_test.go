package deployment_test

import (
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/deployment/deploymenttest"
	"berth.dev/core/store"
)

func TestDisableAndEnableProvider(t *testing.T) {
	f := deploymenttest.New(t)
	d, err := f.Svc.Get(f.Ctx)
	errdefstest.Must(t, err)
	if d.ProviderDisabled || !d.ProviderDisabledAt.IsZero() {
		t.Fatalf("initial deployment: %+v", d)
	}
	_, err = f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.Must(t, err)

	d, err = f.Svc.Disable(f.Ctx, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if !d.ProviderDisabled || d.ProviderDisabledAt.IsZero() || d.Generation != 1 || d.ProviderKind != "docker" {
		t.Fatalf("disabled deployment: %+v", d)
	}
	again, err := f.Svc.Disable(f.Ctx, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if !again.ProviderDisabledAt.Equal(d.ProviderDisabledAt) {
		t.Fatal("disabling again moved the time")
	}
	// Durable: a read, and the store, see it.
	got, err := f.Svc.Get(f.Ctx)
	errdefstest.Must(t, err)
	if !got.ProviderDisabled {
		t.Fatalf("read after disable: %+v", got)
	}
	sw, err := f.St.GetProviderSwitch(f.Ctx)
	errdefstest.Must(t, err)
	if !sw.Disabled {
		t.Fatal("store does not see the switch")
	}
	// A commit of the same deployment keeps the switch and reports it.
	c, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 1)
	errdefstest.Must(t, err)
	if !c.ProviderDisabled {
		t.Fatalf("commit while disabled: %+v", c)
	}

	d, err = f.Svc.Enable(f.Ctx, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if d.ProviderDisabled || !d.ProviderDisabledAt.IsZero() {
		t.Fatalf("enabled deployment: %+v", d)
	}
	d, err = f.Svc.Enable(f.Ctx, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if d.ProviderDisabled {
		t.Fatalf("enabled twice: %+v", d)
	}
}

func TestDisableBeforeFirstCommit(t *testing.T) {
	f := deploymenttest.New(t)
	d, err := f.Svc.Disable(f.Ctx, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if !d.ProviderDisabled || d.Generation != 0 || d.ProviderKind != "" {
		t.Fatalf("disabled before the first commit: %+v", d)
	}
}
