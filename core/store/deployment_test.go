package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"github.com/google/uuid"
)

func testGeneration(kind string) store.NewGeneration {
	return store.NewGeneration{
		ProviderKind: kind,
		PublicConfig: json.RawMessage(`{}`),
		Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{
			Resources:   sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive:   8,
			MaxRetained: 16,
		},
	}
}

func TestDeploymentNoneBeforeFirstCommit(t *testing.T) {
	st, ctx := newStore(t)
	_, err := st.CurrentGeneration(ctx)
	wantClass(t, err, errdefs.ErrNotFound)
	_, err = st.GetGeneration(ctx, 1)
	wantClass(t, err, errdefs.ErrNotFound)
	_, err = st.GetGeneration(ctx, 0)
	wantClass(t, err, errdefs.ErrInvalid)
}

func TestDeploymentCommitGenerations(t *testing.T) {
	st, ctx := newStore(t)
	first := testGeneration("docker")
	g1, err := st.CommitGeneration(ctx, storetest.Seen(t, st), first)
	must(t, err)
	if g1.Generation != 1 || g1.ProviderKind != "docker" || g1.HasCredential() || g1.CreatedAt.IsZero() {
		t.Fatalf("first generation %+v", g1)
	}

	second := testGeneration("direct-test")
	second.PublicConfig = json.RawMessage(`{"region":"eu"}`)
	second.CredentialCiphertext = bytes.Repeat([]byte{7}, 40)
	second.CredentialNonce = bytes.Repeat([]byte{1}, 12)
	second.Specification.Suspension = sandbox.SuspensionPolicy{Idle: 10 * time.Minute, Retention: 48 * time.Hour}
	g2, err := st.CommitGeneration(ctx, storetest.Seen(t, st), second)
	must(t, err)
	if g2.Generation != 2 {
		t.Fatalf("second generation %d", g2.Generation)
	}

	cur, err := st.CurrentGeneration(ctx)
	must(t, err)
	if cur.Generation != 2 || cur.Specification != second.Specification ||
		!bytes.Equal(cur.CredentialCiphertext, second.CredentialCiphertext) ||
		!bytes.Equal(cur.CredentialNonce, second.CredentialNonce) || !cur.HasCredential() {
		t.Fatalf("current %+v", cur)
	}
	var pub map[string]string
	must(t, json.Unmarshal(cur.PublicConfig, &pub))
	if pub["region"] != "eu" {
		t.Fatalf("public config %s", cur.PublicConfig)
	}
	old, err := st.GetGeneration(ctx, 1)
	must(t, err)
	if old.ProviderKind != "docker" || old.Specification != first.Specification || old.HasCredential() {
		t.Fatalf("generation 1 changed: %+v", old)
	}
}

// TestDeploymentCommitRefusesStaleExpectation: a commit names the
// generation it read as current (store.GenerationSeen); a token read
// before another commit is refused (errdefs.ErrFailedPrecondition) and
// the zero token, which no read made, is refused before any write
// (store.ErrGenerationNotSeen). Nothing is written either way.
func TestDeploymentCommitRefusesStaleExpectation(t *testing.T) {
	st, ctx := newOwned(t)
	none := storetest.Seen(t, st)
	if _, ok := none.Current(); ok || none.Generation() != 0 {
		t.Fatalf("seen before the first commit: %d %v", none.Generation(), ok)
	}
	_, err := st.CommitGeneration(ctx, none, testGeneration("docker"))
	must(t, err)
	one := storetest.Seen(t, st)
	if g, ok := one.Current(); !ok || one.Generation() != 1 || g.ProviderKind != "docker" {
		t.Fatalf("seen after the first commit: %d %v %q", one.Generation(), ok, g.ProviderKind)
	}
	_, err = st.CommitGeneration(ctx, none, testGeneration("docker"))
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	_, err = st.ReplaceGeneration(ctx, none, testGeneration("docker"), store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	// Another commit moves the generation: the token of 1 is stale too.
	_, err = st.ReplaceGeneration(ctx, one, testGeneration("docker"), store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	_, err = st.CommitGeneration(ctx, one, testGeneration("docker"))
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	_, err = st.ReplaceGeneration(ctx, one, testGeneration("docker"), store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
	wantClass(t, err, errdefs.ErrFailedPrecondition)

	var zero store.GenerationSeen
	_, err = st.CommitGeneration(ctx, zero, testGeneration("docker"))
	wantClass(t, err, store.ErrGenerationNotSeen)
	wantClass(t, err, errdefs.ErrInvalid)
	_, err = st.ReplaceGeneration(ctx, zero, testGeneration("docker"), store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
	wantClass(t, err, store.ErrGenerationNotSeen)

	cur, err := st.CurrentGeneration(ctx)
	must(t, err)
	if cur.Generation != 2 {
		t.Fatalf("current generation %d after refused commits, want 2", cur.Generation)
	}
	_, err = st.GetGeneration(ctx, 3)
	wantClass(t, err, errdefs.ErrNotFound)
}

func TestDeploymentConcurrentCommitsCreateOneGeneration(t *testing.T) {
	st, ctx := newStore(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	// Every commit read the same (no) generation as current.
	seen := storetest.Seen(t, st)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = st.CommitGeneration(ctx, seen, testGeneration("docker"))
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errdefs.IsFailedPrecondition(err):
			t.Fatalf("commit: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d commits won, want 1", won)
	}
	cur, err := st.CurrentGeneration(ctx)
	must(t, err)
	if cur.Generation != 1 {
		t.Fatalf("current generation %d", cur.Generation)
	}
}

func TestDeploymentGenerationsAreImmutable(t *testing.T) {
	st, ctx := newStore(t)
	_, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker"))
	must(t, err)
	for _, stmt := range []string{
		"UPDATE deployment_generations SET cpu_millis = 2000 WHERE generation = 1",
		"UPDATE deployment_generations SET provider_kind = 'other'",
		"DELETE FROM deployment_generations WHERE generation = 1",
	} {
		_, err := st.Pool().Exec(ctx, stmt)
		if err == nil {
			t.Fatalf("%q succeeded", stmt)
		}
	}
	g, err := st.GetGeneration(ctx, 1)
	must(t, err)
	if g.ProviderKind != "docker" || g.Specification.Resources.CPUMillis != 1000 {
		t.Fatalf("generation changed: %+v", g)
	}
}

func TestDeploymentCommitRefusesMalformedGeneration(t *testing.T) {
	st, ctx := newStore(t)
	bad := []func(g *store.NewGeneration){
		func(g *store.NewGeneration) { g.PublicConfig = json.RawMessage(`[]`) },
		func(g *store.NewGeneration) { g.Observations = nil },
		func(g *store.NewGeneration) { g.CredentialCiphertext = []byte("0123456789abcdefghij") },
		func(g *store.NewGeneration) {
			g.CredentialCiphertext, g.CredentialNonce = []byte("0123456789abcdefghij"), []byte("short")
		},
		func(g *store.NewGeneration) { g.ProviderKind = "Not A Kind" },
		func(g *store.NewGeneration) { g.Specification.MaxActive = 0 },
		func(g *store.NewGeneration) { g.Specification.Suspension.Idle = time.Minute },
	}
	for i, mutate := range bad {
		g := testGeneration("docker")
		mutate(&g)
		_, err := st.CommitGeneration(ctx, storetest.Seen(t, st), g)
		if !errdefs.IsInvalid(err) {
			t.Fatalf("case %d: %v, want invalid", i, err)
		}
	}
	_, err := st.CurrentGeneration(ctx)
	wantClass(t, err, errdefs.ErrNotFound)
}

// TestNodeGenerations: a node must serve the current generation while it
// is enabled, and every generation an unreleased allocation on it is bound
// to, whatever is current; a retired node keeps only what it holds, and a
// released allocation no longer holds its generation.
func TestNodeGenerations(t *testing.T) {
	st, ctx := newStore(t)
	owned := storetest.Owner(t, st)
	served := func(node uuid.UUID) []uint64 {
		t.Helper()
		gens, err := st.NodeGenerations(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		out := []uint64{}
		for _, g := range gens {
			out = append(out, g.Generation)
		}
		return out
	}
	idle := storetest.EnabledNode(t, owned)
	if got := served(idle); len(got) != 0 {
		t.Fatalf("before the first commit: %v", got)
	}
	if _, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker")); err != nil {
		t.Fatal(err)
	}
	b, _ := storetest.RunningSession(t, owned) // generation 1, on a new node
	holder := b.Allocation.NodeID
	second := testGeneration("docker")
	second.Specification.Resources.MemoryBytes *= 2
	if _, err := st.CommitGeneration(ctx, storetest.Seen(t, st), second); err != nil {
		t.Fatal(err)
	}
	if got := served(idle); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("enabled node without allocations: %v, want [2]", got)
	}
	if got := served(holder); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("enabled node holding a generation 1 allocation: %v, want [1 2]", got)
	}
	if _, err := owned.SetNodeState(ctx, holder, store.NodeEnabled, store.NodeRetired, store.NewAdminProvenance(uuid.New()), uuid.New()); err != nil {
		t.Fatal(err)
	}
	if got := served(holder); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("retired node holding a generation 1 allocation: %v, want [1]", got)
	}
	if _, _, err := owned.DeleteSession(ctx, b.Session.ID); err != nil {
		t.Fatal(err)
	}
	a, err := st.GetAllocation(ctx, b.Allocation.ID)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Release(t, owned, a)
	if got := served(holder); len(got) != 0 {
		t.Fatalf("retired node after its release: %v, want none", got)
	}
}

// TestReplacementFencesAdmission: a replacement waits for the admissions
// in flight (they hold the deployment row shared) and pauses new ones
// until it commits; an admission prepared for the generation it replaced
// is refused (ErrGenerationMoved) and writes nothing, and one prepared for
// the new generation is admitted.
func TestReplacementFencesAdmission(t *testing.T) {
	st, ctx := ownedStore(t)
	if _, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker")); err != nil {
		t.Fatal(err)
	}
	node := presentNode(t, ctx, st)
	if _, err := st.CreateSession(ctx, sessionParams(t, 10)); err != nil {
		t.Fatalf("admission for the current generation: %v", err)
	}

	// An admission in flight: a transaction holding the row shared.
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT provider_disabled FROM deployment FOR SHARE"); err != nil {
		t.Fatal(err)
	}
	second := testGeneration("docker")
	second.Specification.Resources.MemoryBytes *= 2
	done := make(chan store.Replaced, 1)
	seen := storetest.Seen(t, st)
	go func() {
		r, err := st.ReplaceGeneration(ctx, seen, second, store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
		if err != nil {
			t.Errorf("replace: %v", err)
		}
		done <- r
	}()
	const hold = 300 * time.Millisecond
	select {
	case <-done:
		t.Fatal("the replacement committed while an admission held the deployment row")
	case <-time.After(hold):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	// It waited for the lock (it started a moment after the hold did).
	if r.Generation.Generation != 2 || r.LockWait < hold/2 {
		t.Fatalf("replacement %+v, want generation 2 after waiting for the admission's lock", r)
	}

	var before int
	if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM sessions").Scan(&before); err != nil {
		t.Fatal(err)
	}
	_, err = st.CreateSession(ctx, sessionParams(t, 10))
	wantClass(t, err, store.ErrGenerationMoved)
	var after int
	if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM sessions").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("a moved admission wrote %d sessions", after-before)
	}
	storetest.Present(t, st, node, 2)
	p := sessionParams(t, 10)
	p.Generation = 2
	b, err := st.CreateSession(ctx, p)
	if err != nil || b.Placement.Generation != 2 {
		t.Fatalf("admission for generation 2: %+v %v", b.Placement, err)
	}
}

// TestReplaceGenerationRefusals: nothing committed, or another current
// generation than the expected one: nothing is written.
func TestReplaceGenerationRefusals(t *testing.T) {
	st, ctx := newOwned(t)
	none := storetest.Seen(t, st)
	_, err := st.ReplaceGeneration(ctx, none, testGeneration("docker"), store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New())
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	if _, err := st.CommitGeneration(ctx, none, testGeneration("docker")); err != nil {
		t.Fatal(err)
	}
	_, err = st.ReplaceGeneration(ctx, none, testGeneration("docker"), store.Replacement{RetireNodes: true}, store.NewAdminProvenance(uuid.New()), uuid.New())
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	if g, err := st.CurrentGeneration(ctx); err != nil || g.Generation != 1 {
		t.Fatalf("current after refusals: %d %v", g.Generation, err)
	}
}

// TestReplaceGenerationRetiresOnlyDrainedNodes: a replacement that
// retires nodes lists the enabled nodes its caller drained; when another
// node is enabled (enabled after the caller read them) the commit is
// refused (deployment_nodes_moved) and writes nothing: no generation, no
// retirement, no revoked token. With every enabled node listed it retires
// them.
func TestReplaceGenerationRetiresOnlyDrainedNodes(t *testing.T) {
	st, ctx := newOwned(t)
	if _, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker")); err != nil {
		t.Fatal(err)
	}
	a := storetest.EnabledNode(t, st)
	enabled, err := st.EnabledNodes(ctx)
	must(t, err)
	if len(enabled) != 1 || enabled[0] != a {
		t.Fatalf("enabled nodes %v, want [%s]", enabled, a)
	}
	b := storetest.EnabledNode(t, st) // enabled after the caller read them
	_, err = st.ReplaceGeneration(ctx, storetest.Seen(t, st), testGeneration("direct-test"), store.Replacement{RetireNodes: true, Drained: enabled}, store.NewAdminProvenance(uuid.New()), uuid.New())
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "deployment_nodes_moved" || !errors.Is(err, errdefs.ErrFenced) {
		t.Fatalf("a replacement retiring an undrained node: %v, want the deployment_nodes_moved refusal", err)
	}
	if g, err := st.CurrentGeneration(ctx); err != nil || g.Generation != 1 {
		t.Fatalf("current after the refusal: %d %v", g.Generation, err)
	}
	for _, id := range []uuid.UUID{a, b} {
		if n, err := st.GetNode(ctx, id); err != nil || n.State != store.NodeEnabled {
			t.Fatalf("node after the refusal: %s %v, want enabled", n.State, err)
		}
	}
	enabled, err = st.EnabledNodes(ctx)
	must(t, err)
	// The last insert is the second node's node.retire event: refused, the
	// whole replacement rolls back (no generation, no retirement, no
	// event).
	undo := refuseWrites(t, ctx, st, "audit_events", "INSERT",
		fmt.Sprintf("NEW.action = 'node.retire' AND NEW.resource = 'nodes/%s'", enabled[1]))
	_, err = st.ReplaceGeneration(ctx, storetest.Seen(t, st), testGeneration("direct-test"), store.Replacement{RetireNodes: true, Drained: enabled}, store.NewAdminProvenance(uuid.New()), uuid.New())
	if err == nil {
		t.Fatal("replacement succeeded despite the injected failure")
	}
	undo()
	if g, err := st.CurrentGeneration(ctx); err != nil || g.Generation != 1 {
		t.Fatalf("current after the failure: %d %v", g.Generation, err)
	}
	if n := len(decisions(t, st, "deployment.")) + len(decisions(t, st, "node.retire")); n != 0 {
		t.Fatalf("refused and failed replacements recorded %d events", n)
	}
	req, eventID := uuid.New(), uuid.New()
	r, err := st.ReplaceGeneration(ctx, storetest.Seen(t, st), testGeneration("direct-test"), store.Replacement{RetireNodes: true, Drained: enabled}, store.NewAdminProvenance(req), eventID)
	must(t, err)
	if r.Generation.Generation != 2 || len(r.RetiredNodes) != 2 {
		t.Fatalf("replacement %+v, want generation 2 retiring both nodes", r)
	}
	events := decisions(t, st, "deployment.")
	if len(events) != 1 {
		t.Fatalf("deployment events %+v", events)
	}
	e := events[0]
	if e.ID != eventID || e.RequestID != req || e.Actor() != "admin" || e.Kind != store.AuditDecision || e.Action != "deployment.replace" ||
		e.Resource != "deployment" || e.Detail["from_generation"] != float64(1) || e.Detail["to_generation"] != float64(2) ||
		e.Detail["from_provider_kind"] != "docker" || e.Detail["to_provider_kind"] != "direct-test" ||
		e.Detail["nodes_retired"] != float64(2) || e.Detail["tokens_revoked"] != float64(r.RevokedTokens) {
		t.Fatalf("replace event %+v", e)
	}
	retired := decisions(t, st, "node.retire")
	if len(retired) != 2 {
		t.Fatalf("node.retire events %+v", retired)
	}
	for _, n := range retired {
		if n.ParentID == nil || *n.ParentID != eventID || n.RequestID != req || n.Actor() != "admin" ||
			!slices.Contains([]string{"nodes/" + a.String(), "nodes/" + b.String()}, n.Resource) || n.Detail["replacement_generation"] != float64(2) {
			t.Fatalf("node.retire event %+v", n)
		}
	}
	if retired[0].Resource == retired[1].Resource {
		t.Fatalf("both node.retire events name %s", retired[0].Resource)
	}
}

// TestServingPin: the pin is promoted only for the current generation,
// once; a late report for a generation a replacement superseded never
// acquires it.
func TestServingPin(t *testing.T) {
	st, ctx := ownedStore(t)
	pin := func() uint64 {
		t.Helper()
		p, err := st.GetServingPin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p.Generation
	}
	if ok, err := st.PromoteServingPin(ctx, 1); err != nil || ok || pin() != 0 {
		t.Fatalf("pin before any commit: %v %v %d", ok, err, pin())
	}
	if _, err := st.CommitGeneration(ctx, storetest.Seen(t, st), testGeneration("docker")); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.PromoteServingPin(ctx, 1); err != nil || !ok || pin() != 1 {
		t.Fatalf("pin of the current generation: %v %v %d", ok, err, pin())
	}
	if ok, err := st.PromoteServingPin(ctx, 1); err != nil || ok {
		t.Fatalf("pin again: %v %v", ok, err)
	}
	if _, err := st.ReplaceGeneration(ctx, storetest.Seen(t, st), testGeneration("docker"), store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New()); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.PromoteServingPin(ctx, 1); err != nil || ok || pin() != 1 {
		t.Fatalf("a late report for the superseded generation: %v %v %d", ok, err, pin())
	}
	if ok, err := st.PromoteServingPin(ctx, 2); err != nil || !ok || pin() != 2 {
		t.Fatalf("pin of the new generation: %v %v %d", ok, err, pin())
	}
	if ok, err := st.PromoteServingPin(ctx, 1); err != nil || ok || pin() != 2 {
		t.Fatalf("the pin moved back: %v %v %d", ok, err, pin())
	}
}
