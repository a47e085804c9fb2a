package deployment_test

import (
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/deployment"
	"berth.dev/core/deployment/deploymenttest"
	"berth.dev/core/events"
	"berth.dev/core/store"
)

// TestACommittedGenerationIsPublished: a commit and a replacement each
// publish events.Generation after their transaction (Core gives the nodes
// the new generation at once); a refused commit publishes nothing.
func TestACommittedGenerationIsPublished(t *testing.T) {
	bus := events.New()
	sub := bus.Subscribe(events.Any(events.Generation))
	defer sub.Close()
	f := deploymenttest.NewWith(t, deployment.Options{Events: bus})
	published := func() bool {
		select {
		case <-sub.Ready():
			sub.Take()
			return true
		default:
			return false
		}
	}
	_, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.Must(t, err)
	if !published() {
		t.Fatal("the first commit published nothing")
	}
	if _, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0); err == nil {
		t.Fatal("a stale commit was accepted")
	}
	if published() {
		t.Fatal("a refused commit published a generation")
	}
	_, err = f.Svc.Replace(f.Ctx, deploymenttest.DirectCandidate("eu", "tok"), nil, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if !published() {
		t.Fatal("the replacement published nothing")
	}
}
