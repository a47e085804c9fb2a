package deployment_test

import (
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/deployment/deploymenttest"
	"berth.dev/core/store"
)

// TestCommitStoresTheRegistrationsMode: a generation keeps its
// registration's Mode: Docker's is nodes, deploymenttest.DirectKind's
// (ModeDirect) is direct, so the store places its Sessions on the direct
// lane.
func TestCommitStoresTheRegistrationsMode(t *testing.T) {
	f := deploymenttest.New(t)
	_, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.Must(t, err)
	g, err := f.St.GetGeneration(f.Ctx, 1)
	errdefstest.Must(t, err)
	if g.Mode != store.ModeNodes {
		t.Fatalf("docker generation mode %q", g.Mode)
	}
	_, err = f.Svc.Replace(f.Ctx, deploymenttest.DirectCandidate("eu", "tok"), nil, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	g, err = f.St.GetGeneration(f.Ctx, 2)
	errdefstest.Must(t, err)
	if g.Mode != store.ModeDirect || g.ProviderKind != deploymenttest.DirectKind {
		t.Fatalf("direct generation %q mode %q", g.ProviderKind, g.Mode)
	}
}
