package deployment_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/deployment"
	"berth.dev/core/deployment/deploymenttest"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestReplaceInheritsWhatTheMaskLeavesOut: a replacement that sets only
// the memory limit inherits the provider kind, configuration and every
// other specification field from the current generation; the preview
// shows exactly what the replacement commits; a retry after the commit
// returns it without a third generation; a stale expected generation is
// refused and writes nothing; the same candidate at the new generation
// changes nothing; same-kind nodes are not retired.
func TestReplaceInheritsWhatTheMaskLeavesOut(t *testing.T) {
	f := deploymenttest.New(t)
	node := storetest.EnabledNode(t, f.St)
	first := deploymenttest.DefaultSpec()
	first.Suspension = sandbox.SuspensionPolicy{Idle: time.Minute, Retention: time.Hour}
	c := deploymenttest.DockerCandidate()
	c.Specification = first
	_, err := f.Svc.Commit(f.Ctx, c, 0)
	errdefstest.Must(t, err)

	memory := deployment.Candidate{Specification: sandbox.Specification{Resources: sandbox.Resources{MemoryBytes: 2 << 30}}}
	set := deployment.Fields{deployment.FieldMemoryBytes}
	want := first
	want.Resources.MemoryBytes = 2 << 30

	p, err := f.Svc.PreviewReplacement(f.Ctx, memory, set)
	errdefstest.Must(t, err)
	if !p.Changed || p.ExpectedGeneration != 1 || p.Deployment.Generation != 2 || p.Deployment.ProviderKind != "docker" || p.Deployment.Specification != want {
		t.Fatalf("preview %+v, want generation 2 with %+v", p, want)
	}
	f.WantGenerations(t, 1, "after a preview")

	r, err := f.Svc.Replace(f.Ctx, memory, set, p.ExpectedGeneration, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if !r.Changed || r.Deployment.Generation != 2 || r.Deployment.Specification != want || len(r.RetiredNodes) != 0 || r.RevokedTokens != 0 {
		t.Fatalf("replacement %+v", r)
	}
	got, err := f.Svc.Get(f.Ctx)
	errdefstest.Must(t, err)
	if got.Generation != 2 || got.Specification != want {
		t.Fatalf("current deployment %+v", got)
	}
	n, err := f.St.GetNode(f.Ctx, node)
	errdefstest.Must(t, err)
	if n.State != "enabled" {
		t.Fatalf("a same-kind replacement left the node %s", n.State)
	}

	// The retry of the same request (expected 1) returns generation 2.
	again, err := f.Svc.Replace(f.Ctx, memory, set, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if again.Changed || again.Deployment.Generation != 2 {
		t.Fatalf("retry %+v", again)
	}
	f.WantGenerations(t, 2, "after the retry")

	// Another change against the stale generation 1 is refused.
	other := deployment.Candidate{Specification: sandbox.Specification{Resources: sandbox.Resources{MemoryBytes: 3 << 30}}}
	_, err = f.Svc.Replace(f.Ctx, other, set, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "deployment_generation_moved")
	f.WantGenerations(t, 2, "after the stale replacement")

	// The same candidate at generation 2 changes nothing.
	same, err := f.Svc.Replace(f.Ctx, memory, set, 2, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if same.Changed || same.Deployment.Generation != 2 {
		t.Fatalf("equal replacement %+v", same)
	}
	f.WantGenerations(t, 2, "after the equal replacement")
}

// TestReplaceRefusals: a replacement before the first commit, with an
// unknown mask field, with an invalid value, or bringing another
// credential for the same kind is refused and writes nothing.
func TestReplaceRefusals(t *testing.T) {
	f := deploymenttest.New(t)
	set := deployment.Fields{deployment.FieldMemoryBytes}
	memory := deployment.Candidate{Specification: sandbox.Specification{Resources: sandbox.Resources{MemoryBytes: 2 << 30}}}
	_, err := f.Svc.Replace(f.Ctx, memory, set, 0, store.NewAdminProvenance(uuid.New()))
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "deployment_not_committed")
	_, err = f.Svc.PreviewReplacement(f.Ctx, memory, set)
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "deployment_not_committed")

	_, err = f.Svc.Commit(f.Ctx, deploymenttest.DirectCandidate("eu", "tok"), 0)
	errdefstest.Must(t, err)
	_, err = f.Svc.Replace(f.Ctx, memory, deployment.Fields{"specification.gpus"}, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.WantField(t, err, "update_mask")
	zero := deployment.Candidate{}
	_, err = f.Svc.Replace(f.Ctx, zero, set, 1, store.NewAdminProvenance(uuid.New()))
	if !errdefs.IsInvalid(err) {
		t.Fatalf("memory 0: %v", err)
	}
	// The test adapter inherits nothing: a change that leaves its
	// configuration out is the adapter's refusal.
	_, err = f.Svc.Replace(f.Ctx, memory, set, 1, store.NewAdminProvenance(uuid.New()))
	if !errdefs.IsInvalid(err) {
		t.Fatalf("configuration left to an adapter that does not inherit: %v", err)
	}
	// Another credential for the same kind is not replaced.
	c := deploymenttest.DirectCandidate("us", "other")
	_, err = f.Svc.Replace(f.Ctx, c, nil, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "deployment_credential_replacement_unsupported")
	f.WantGenerations(t, 1, "after the refusals")

	// The same credential with another region is a replacement; the new
	// generation's credential is sealed for generation 2.
	r, err := f.Svc.Replace(f.Ctx, deploymenttest.DirectCandidate("us", "tok"), nil, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	g, err := f.St.GetGeneration(f.Ctx, 2)
	errdefstest.Must(t, err)
	cred, err := deployment.OpenCredential(f.Key, f.InstallationID, g)
	errdefstest.Must(t, err)
	if !r.Changed || string(cred) != "tok" {
		t.Fatalf("replacement %+v, credential %q", r, cred)
	}
}

// TestReplaceWithAnotherKindRetiresNodes: a replacement with another
// provider kind retires every enabled node and revokes every unused
// enrollment token in its transaction; enrolled nodes, used tokens and
// retired nodes are left as they are.
func TestReplaceWithAnotherKindRetiresNodes(t *testing.T) {
	f := deploymenttest.New(t)
	_, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.Must(t, err)
	a, b := storetest.EnabledNode(t, f.St), storetest.EnabledNode(t, f.St)
	token := func() string {
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		h := sha256.Sum256(id)
		tok, err := f.St.CreateEnrollmentToken(f.Ctx, hex.EncodeToString(id), h[:], time.Hour)
		errdefstest.Must(t, err)
		return tok.ID
	}
	unused := token()
	r, err := f.Svc.Replace(f.Ctx, deploymenttest.DirectCandidate("eu", "tok"), nil, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	retired := map[uuid.UUID]bool{}
	for _, id := range r.RetiredNodes {
		retired[id] = true
	}
	if !r.Changed || r.Deployment.ProviderKind != deploymenttest.DirectKind || len(r.RetiredNodes) != 2 ||
		!retired[a] || !retired[b] || r.RevokedTokens != 1 {
		t.Fatalf("replacement %+v", r)
	}
	for _, id := range []uuid.UUID{a, b} {
		n, err := f.St.GetNode(f.Ctx, id)
		errdefstest.Must(t, err)
		if n.State != "retired" {
			t.Fatalf("node %s after a replacement with another kind", n.State)
		}
	}
	tok, err := f.St.GetEnrollmentToken(f.Ctx, unused)
	errdefstest.Must(t, err)
	if tok.RevokedAt == nil {
		t.Fatal("an unused enrollment token survived the replacement")
	}
}

// TestReplacementRetiresThroughTheGate: a replacement with another
// provider kind commits inside the retirement gate (the lifecycle drain),
// which is given exactly the enabled nodes; inside it nothing is
// committed yet. A gate whose drain failed (ErrReplaceUndrained) leaves
// the deployment, the nodes and the tokens as they were, refused with
// owner_failure. A replacement of the same kind does not touch the gate.
func TestReplacementRetiresThroughTheGate(t *testing.T) {
	undrained := true
	var gated [][]uuid.UUID
	var f deploymenttest.Fixture
	var a, b uuid.UUID
	f = deploymenttest.NewWith(t, deployment.Options{Gate: func(_ context.Context, nodes []uuid.UUID, retire func() error) error {
		gated = append(gated, nodes)
		if undrained {
			return deployment.ErrReplaceUndrained
		}
		// Inside the gate, before retire, nothing is committed.
		f.WantGenerations(t, 2, "inside the gate")
		for _, id := range []uuid.UUID{a, b} {
			if n, err := f.St.GetNode(f.Ctx, id); err != nil || n.State != "enabled" {
				t.Errorf("inside the gate node is %s (%v), want enabled", n.State, err)
			}
		}
		return retire()
	}})
	_, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.Must(t, err)
	a, b = storetest.EnabledNode(t, f.St), storetest.EnabledNode(t, f.St)

	memory := deployment.Candidate{Specification: sandbox.Specification{Resources: sandbox.Resources{MemoryBytes: 2 << 30}}}
	_, err = f.Svc.Replace(f.Ctx, memory, deployment.Fields{deployment.FieldMemoryBytes}, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if len(gated) != 0 {
		t.Fatalf("a same-kind replacement ran the gate for %v", gated)
	}

	_, err = f.Svc.Replace(f.Ctx, deploymenttest.DirectCandidate("eu", "tok"), nil, 2, store.NewAdminProvenance(uuid.New()))
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "owner_failure")
	f.WantGenerations(t, 2, "after an undrained replacement")
	for _, id := range []uuid.UUID{a, b} {
		if n, err := f.St.GetNode(f.Ctx, id); err != nil || n.State != "enabled" {
			t.Fatalf("after an undrained replacement node is %s (%v), want enabled", n.State, err)
		}
	}

	undrained = false
	r, err := f.Svc.Replace(f.Ctx, deploymenttest.DirectCandidate("eu", "tok"), nil, 2, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if !r.Changed || len(r.RetiredNodes) != 2 || len(gated) != 2 {
		t.Fatalf("replacement %+v after %d gate runs, want both nodes retired through the gate", r, len(gated))
	}
	for _, nodes := range gated {
		if len(nodes) != 2 || !slices.Contains(nodes, a) || !slices.Contains(nodes, b) {
			t.Fatalf("the gate was given %v, want the enabled nodes %s and %s", nodes, a, b)
		}
	}
}
