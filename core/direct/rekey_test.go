package direct_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/deployment"
	"berth.dev/core/lifecycle"
	"berth.dev/core/store"
	"berth.dev/core/suspension"
	"berth.dev/sandbox"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/errdefs"
)

// running places a Session and runs the direct lane's worker until its
// allocation runs with a settled Create: E2B holds its sandbox and the
// store its native id.
func (e *env) running(t *testing.T) store.Allocation {
	t.Helper()
	e.pass(t) // records the committed generation's readiness
	b := e.session(t)
	w := lifecycle.NewWorker(lifecycle.Config{
		Store: e.st, Suspension: suspension.New(e.st, nil), Key: e.key, Installation: e.inst,
		Provider: func(uuid.UUID) (sandbox.SandboxProvider, error) { return e.set.Provider(), nil },
		Serves:   e.set.Serves, CallTimeout: 5 * time.Second,
	}, lifecycle.DirectLane)
	for range 2 {
		must(t, w.Pass(context.Background()))
	}
	a, err := e.st.GetAllocation(context.Background(), b.Allocation.ID)
	must(t, err)
	if a.State != store.AllocationRunning || a.ProviderID == "" {
		t.Fatalf("allocation %s, provider id %q", a.State, a.ProviderID)
	}
	return a
}

// replaceKey replaces the current generation's credential with key,
// keeping everything else.
func (e *env) replaceKey(key string) (uint64, error) {
	ctx := context.Background()
	cur, err := e.deploy.Get(ctx)
	if err != nil {
		return 0, err
	}
	r, err := e.deploy.Replace(ctx, deployment.Candidate{
		ProviderKind: e2b.Kind,
		Credential:   e2btest.Credential(key),
	}, deployment.Fields{deployment.FieldProviderKind, deployment.FieldCredential}, cur.Generation, store.NewAdminProvenance(uuid.New()))
	return r.Deployment.Generation, err
}

func (e *env) source(t *testing.T, g uint64) uint64 {
	t.Helper()
	src, err := e.st.CredentialSource(context.Background(), g)
	must(t, err)
	return src
}

func (e *env) current(t *testing.T) uint64 {
	t.Helper()
	d, err := e.deploy.Get(context.Background())
	must(t, err)
	return d.Generation
}

// TestKeyReplacementRepointsRetainedGenerations: replacing the key of a
// direct provider with another key of the same E2B team verifies the two
// retained generations' sandboxes with it, commits generation 3 with both
// pointed at its credential, and serves them with it: once the old key is
// revoked at E2B, the retained sandboxes are still observed, and a
// restarted Core builds them with the new key.
func TestKeyReplacementRepointsRetainedGenerations(t *testing.T) {
	e := newEnv(t)
	keyA2 := e.e2b.AddKey("team-a")
	g1 := e.commit(t, e.keyA, lease1)
	a1 := e.running(t)
	g2 := e.commit(t, e.keyA, lease2)
	e.pass(t)
	a2 := e.running(t)
	if a1.Generation != int64(g1) || a2.Generation != int64(g2) {
		t.Fatalf("generations %d, %d", a1.Generation, a2.Generation)
	}

	g3, err := e.replaceKey(keyA2)
	must(t, err)
	if g3 != g2+1 || e.source(t, g1) != g3 || e.source(t, g2) != g3 || e.source(t, g3) != g3 {
		t.Fatalf("generation %d; sources %d, %d, %d", g3, e.source(t, g1), e.source(t, g2), e.source(t, g3))
	}
	for _, g := range []uint64{g1, g2, g3} {
		must(t, e.set.Serves(int64(g)))
	}

	e.e2b.RevokeKey(e.keyA)
	for _, a := range []store.Allocation{a1, a2} {
		info, err := e.set.Provider().GetInfo(context.Background(), a.Reference())
		must(t, err)
		if info.ProviderID != a.ProviderID || info.State != sandbox.StateRunning {
			t.Fatalf("after the old key's revocation: %+v", info)
		}
	}
	restarted := e.restartedSet(t)
	for _, g := range []uint64{g1, g2, g3} {
		must(t, restarted.Serves(int64(g)))
	}
}

// TestKeyOfAnotherAccountIsRefused: a key of another E2B team (accepted
// by E2B, same endpoint, but it sees none of the retained sandboxes) is
// refused deployment_credential_not_verified, naming neither key; nothing
// is committed and the old key goes on serving.
func TestKeyOfAnotherAccountIsRefused(t *testing.T) {
	e := newEnv(t)
	keyB := e.e2b.AddTeam("team-b")
	g1 := e.commit(t, e.keyA, lease1)
	a := e.running(t)
	_, err := e.replaceKey(keyB)
	wantReason(t, err, "deployment_credential_not_verified")
	if strings.Contains(err.Error(), keyB) || strings.Contains(err.Error(), e.keyA) || strings.Contains(err.Error(), a.ProviderID) {
		t.Fatalf("refusal %q names a key or a native id", err)
	}
	if e.current(t) != g1 || e.source(t, g1) != g1 {
		t.Fatalf("committed: current %d, source %d", e.current(t), e.source(t, g1))
	}
	must(t, e.set.Serves(int64(g1)))
	if _, err := e.set.Provider().GetInfo(context.Background(), a.Reference()); err != nil {
		t.Fatalf("the old key no longer serves: %v", err)
	}
}

// TestKeyReplacementWaitsForTheOldKeysCalls: a call made with the old key
// that outlives the bound refuses the replacement
// (deployment_credential_busy) with nothing committed, and the old
// adapter is readmitted: once the call ends, calls go through again.
func TestKeyReplacementWaitsForTheOldKeysCalls(t *testing.T) {
	e := newEnvWith(t, 300*time.Millisecond)
	keyA2 := e.e2b.AddKey("team-a")
	g1 := e.commit(t, e.keyA, lease1)
	a := e.running(t)
	e.e2b.ResetCalls()
	e.e2b.Arm("list", e2btest.FaultHang, nil)
	done := make(chan error, 1)
	go func() {
		_, err := e.set.Provider().GetInfo(context.Background(), a.Reference())
		done <- err
	}()
	e.waitForCall(t, "list")
	_, err := e.replaceKey(keyA2)
	wantReason(t, err, "deployment_credential_busy")
	if e.current(t) != g1 {
		t.Fatalf("committed generation %d", e.current(t))
	}
	e.e2b.Release()
	must(t, <-done)
	if _, err := e.set.Provider().GetInfo(context.Background(), a.Reference()); err != nil {
		t.Fatalf("after the busy refusal: %v", err)
	}
	if _, err := e.replaceKey(keyA2); err != nil {
		t.Fatalf("the retry: %v", err)
	}
}

// TestCommitNeverReplacesAKey: Commit after the first generation never
// replaces a key, also for a direct provider
// (deployment_credential_replacement_unsupported, which says to use
// ReplaceDeployment).
func TestCommitNeverReplacesAKey(t *testing.T) {
	e := newEnv(t)
	keyA2 := e.e2b.AddKey("team-a")
	e.commit(t, e.keyA, lease1)
	_, err := e.deploy.Commit(context.Background(), deployment.Candidate{
		ProviderKind: e2b.Kind, Public: e.public(lease1),
		Credential:    e2btest.Credential(keyA2),
		Specification: spec, SuspensionOff: true,
	}, 1)
	wantReason(t, err, "deployment_credential_replacement_unsupported")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("class of %v", err)
	}
}

// TestUnservedGenerationIsObservedUnavailable: while a running
// allocation's generation has no adapter (here: the Set closed), the
// lane's worker records its compute unavailable with the fixed reason
// direct_generation_unavailable, and E2B receives nothing.
func TestUnservedGenerationIsObservedUnavailable(t *testing.T) {
	e := newEnv(t)
	e.commit(t, e.keyA, lease1)
	a := e.running(t)
	must(t, e.set.Close())
	e.e2b.ResetCalls()
	w := lifecycle.NewWorker(lifecycle.Config{
		Store: e.st, Suspension: suspension.New(e.st, nil), Key: e.key, Installation: e.inst,
		Provider: func(uuid.UUID) (sandbox.SandboxProvider, error) { return e.set.Provider(), nil },
		Serves:   e.set.Serves, CallTimeout: 5 * time.Second, ObservePeriod: time.Millisecond,
	}, lifecycle.DirectLane)
	time.Sleep(5 * time.Millisecond)
	must(t, w.Pass(context.Background()))
	got, err := e.st.GetAllocation(context.Background(), a.ID)
	must(t, err)
	if got.Observation.Compute != store.ObservedUnavailable || got.Observation.Reason != "direct_generation_unavailable" {
		t.Fatalf("observation %+v", got.Observation)
	}
	e.noCalls(t)
}
