package direct_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/deployment"
	"berth.dev/core/direct"
	"berth.dev/core/internal/memdirect"
	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/suspension"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

const (
	keyA = "e2b_setteamakey0123456789abcdef0123"
)

var spec = sandbox.Specification{
	Resources: sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}, MaxActive: 8, MaxRetained: 8,
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// env is an installation whose deployment service commits memdirect
// generations (sealed credentials, as Core commits them) and a Set over
// the same registry.
type env struct {
	st     *storetest.Owned
	reg    *providers.Registry
	inst   store.Installation
	key    secrets.Key
	vendor *memdirect.Vendor
	deploy *deployment.Service
	set    *direct.Set
	svc    *sessions.Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, 5*time.Second)
}

// newEnvWith is newEnv with a Set whose fences are awaited at most
// closeTimeout (Config.CloseTimeout).
func newEnvWith(t *testing.T, closeTimeout time.Duration) *env {
	t.Helper()
	ctx := context.Background()
	base := storetest.New(t)
	inst, err := base.ClaimInstallation(ctx, uuid.New(), "https://core.example:8443")
	must(t, err)
	st := storetest.Owner(t, base)
	key, _, err := secrets.NewKey()
	must(t, err)
	v := memdirect.NewVendor()
	v.AddKey(keyA, "team-a")
	reg, err := providers.NewRegistry(memdirect.Registration(v))
	must(t, err)
	set := direct.New(direct.Config{
		Store: st, Registry: reg, Key: key, InstallationID: inst.ID,
		Paths:          sandbox.ProcessPaths{Root: "/usr/lib/berth", State: t.TempDir()},
		RuntimeGateway: true, CloseTimeout: closeTimeout,
	})
	t.Cleanup(func() { _ = set.Close() })
	deploy, err := deployment.NewService(st, reg, key, inst.ID, deployment.Options{Direct: set})
	must(t, err)
	svc := sessions.New(st, key, inst.ID, uuid.New, suspension.New(st, nil), nil)
	return &env{st: st, reg: reg, inst: inst, key: key, vendor: v, deploy: deploy, set: set, svc: svc}
}

// commit commits (or replaces with) a memdirect generation with key and
// template.
func (e *env) commit(t *testing.T, key, template string) uint64 {
	t.Helper()
	g, err := e.commitErr(key, template)
	must(t, err)
	return g
}

func (e *env) commitErr(key, template string) (uint64, error) {
	ctx := context.Background()
	c := deployment.Candidate{
		ProviderKind:  memdirect.Kind,
		Public:        json.RawMessage(`{"template":"` + template + `"}`),
		Credential:    sandbox.NewCredential([]byte(`{"api_key":"` + key + `"}`)),
		Specification: spec, SuspensionOff: true,
	}
	cur, err := e.deploy.Get(ctx)
	if err != nil {
		return 0, err
	}
	if cur.Generation == 0 {
		d, err := e.deploy.Commit(ctx, c, 0)
		return d.Generation, err
	}
	r, err := e.deploy.Replace(ctx, c, nil, cur.Generation)
	return r.Deployment.Generation, err
}

func (e *env) readiness(t *testing.T, g uint64) store.DirectReadiness {
	t.Helper()
	r, err := e.st.DirectReadiness(context.Background(), int64(g))
	must(t, err)
	return r
}

func (e *env) pass(t *testing.T) {
	t.Helper()
	must(t, e.set.Pass(context.Background()))
}

func (e *env) session(t *testing.T) store.SessionBundle {
	t.Helper()
	b, err := e.svc.Create(context.Background(), projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "s"})
	must(t, err)
	return b
}

func createRequest(a store.Allocation) sandbox.CreateRequest {
	return sandbox.CreateRequest{
		Reference: a.Reference(), Resources: spec.Resources,
		Bootstrap: runtimebootstrap.File{
			Version: runtimebootstrap.Version, CoreURL: "https://core.example:8443", DeviceID: a.DeviceID.String(),
			Credential: runtimebootstrap.NewSecret(strings.Repeat("c", 64)),
		},
	}
}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != reason {
		t.Fatalf("error %v, want the refusal %s", err, reason)
	}
}

// TestPassBuildsProbesAndServes: a committed direct generation (built and
// probed before its commit, published after) is probed by a pass, recorded
// ready with its backend fingerprint and pinned as served; the lane then serves it, a Session is
// placed on the lane, and the Provider sends its Create to that
// generation's adapter (the vendor holds one sandbox with the
// allocation's metadata).
func TestPassBuildsProbesAndServes(t *testing.T) {
	e := newEnv(t)
	g := e.commit(t, keyA, "berth-runtime")
	// The commit published the candidate built and probed before it.
	must(t, e.set.Serves(int64(g)))
	e.pass(t)
	r := e.readiness(t, g)
	if !r.Ready || !r.Fresh || !strings.Contains(r.BackendFingerprint, "team-a") {
		t.Fatalf("readiness %+v", r)
	}
	pin, err := e.st.GetServingPin(context.Background())
	must(t, err)
	if pin.Generation != g {
		t.Fatalf("serving pin %d, want %d", pin.Generation, g)
	}
	must(t, e.set.Serves(int64(g)))

	b := e.session(t)
	if b.Allocation.NodeID != store.DirectLane {
		t.Fatalf("placed on %s", b.Allocation.NodeID)
	}
	info, err := e.set.Provider().Create(context.Background(), createRequest(b.Allocation))
	must(t, err)
	if !info.IsSettledRunning(b.Allocation.Reference()) || e.vendor.Len() != 1 {
		t.Fatalf("create: %+v, vendor holds %d", info, e.vendor.Len())
	}
}

// TestRejectedCandidateWritesNothing: a direct candidate whose key the
// vendor rejects is refused before any write (deployment_candidate_not_ready
// naming credential_rejected, never the key), and nothing is committed;
// the same candidate with a valid key commits.
func TestRejectedCandidateWritesNothing(t *testing.T) {
	e := newEnv(t)
	const unknown = "e2b_unknownkey0123456789abcdef0123456"
	_, err := e.commitErr(unknown, "berth-runtime")
	wantReason(t, err, "deployment_candidate_not_ready")
	if !strings.Contains(err.Error(), "credential_rejected") || strings.Contains(err.Error(), unknown) {
		t.Fatalf("refusal %q", err)
	}
	d, err := e.deploy.Get(context.Background())
	must(t, err)
	if d.Generation != 0 {
		t.Fatalf("generation %d committed", d.Generation)
	}
	if g := e.commit(t, keyA, "berth-runtime"); g != 1 {
		t.Fatalf("committed generation %d", g)
	}
}

// TestPublicOriginIsRequired: a Core that serves no Runtime gateway
// refuses a direct candidate whose sandboxes must connect back to it
// (public_origin_required), before building anything.
func TestPublicOriginIsRequired(t *testing.T) {
	e := newEnv(t)
	set := direct.New(direct.Config{Store: e.st, Registry: e.reg, Key: e.key, InstallationID: e.inst.ID,
		Paths: sandbox.ProcessPaths{Root: "/usr/lib/berth", State: t.TempDir()}})
	t.Cleanup(func() { _ = set.Close() })
	_, err := set.Prepare(context.Background(), deployment.DirectCandidate{Generation: 1, Kind: memdirect.Kind})
	wantReason(t, err, "public_origin_required")
	if calls := e.vendor.Calls(); len(calls) != 0 {
		t.Fatalf("the vendor received %v", calls)
	}
}

// TestFailingProbeIsRecordedAndRetried: a served generation whose key the
// vendor stops accepting is recorded not ready with the probe's code,
// gets no new Create (Serves), and Sessions are refused; once the key is
// accepted again the next pass records it ready.
func TestFailingProbeIsRecordedAndRetried(t *testing.T) {
	e := newEnv(t)
	const revoked = "e2b_revokedkey0123456789abcdef012345"
	e.vendor.AddKey(revoked, "team-c")
	g := e.commit(t, revoked, "berth-runtime")
	e.vendor.RemoveKey(revoked)
	e.pass(t)
	r := e.readiness(t, g)
	if r.Ready || r.DiagnosticCode != "credential_rejected" {
		t.Fatalf("readiness %+v, want not ready credential_rejected", r)
	}
	if err := e.set.Serves(int64(g)); !errors.Is(err, direct.ErrNotServed) {
		t.Fatalf("served: %v", err)
	}
	_, err := e.svc.Create(context.Background(), projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "s"})
	wantReason(t, err, "direct_provider_not_ready")

	e.vendor.AddKey(revoked, "team-c")
	e.pass(t)
	if r := e.readiness(t, g); !r.Ready {
		t.Fatalf("after the key came back: %+v", r)
	}
	must(t, e.set.Serves(int64(g)))
}

// TestProviderRefusesWhatIsNotADirectAllocation: a Reference that is not
// exactly a direct allocation Core recorded (an unknown allocation, or a
// recorded one with another tenant) is refused and the vendor receives
// nothing.
func TestProviderRefusesWhatIsNotADirectAllocation(t *testing.T) {
	e := newEnv(t)
	e.commit(t, keyA, "berth-runtime")
	e.pass(t)
	b := e.session(t)
	e.vendor.ResetCalls()
	p := e.set.Provider()
	ctx := context.Background()

	unknown := createRequest(b.Allocation)
	unknown.Reference.AllocationID = uuid.NewString()
	forged := createRequest(b.Allocation)
	forged.Reference.TenantID = uuid.NewString()
	for name, req := range map[string]sandbox.CreateRequest{"unknown": unknown, "forged tenant": forged} {
		info, err := p.Create(ctx, req)
		if !errors.Is(err, errdefs.ErrInvalid) || !info.IsAbsenceReceipt(req.Reference) {
			t.Errorf("%s: %+v, %v; want invalid with the absence receipt", name, info, err)
		}
		if _, err := p.GetInfo(ctx, req.Reference); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s GetInfo: %v", name, err)
		}
		if err := p.Kill(ctx, sandbox.KillRequest{Reference: req.Reference}); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s Kill: %v", name, err)
		}
	}
	if calls := e.vendor.Calls(); len(calls) != 0 {
		t.Fatalf("the vendor received %v", calls)
	}
}

// TestUnwantedGenerationIsClosedAfterItsCalls: a generation replaced by
// another while it holds nothing stops being served at the next pass, and
// its adapter is closed only after its fence excluded the call still
// running on it (Close waits for that); the new one is built and served.
func TestUnwantedGenerationIsClosedAfterItsCalls(t *testing.T) {
	e := newEnv(t)
	g1 := e.commit(t, keyA, "berth-runtime")
	e.pass(t)
	b := e.session(t)
	ctx := context.Background()
	_, err := e.set.Provider().Create(ctx, createRequest(b.Allocation))
	must(t, err)

	// A GetInfo on generation 1 is held inside the vendor while the
	// generation stops being wanted.
	received, release := e.vendor.Hold(memdirect.CallList)
	done := make(chan error, 1)
	go func() {
		_, err := e.set.Provider().GetInfo(ctx, b.Allocation.Reference())
		done <- err
	}()
	<-received
	_, err = e.svc.Delete(ctx, projects.All(), b.Session.ID)
	must(t, err)
	a, err := e.st.GetAllocation(ctx, b.Allocation.ID)
	must(t, err)
	storetest.Release(t, e.st, a)
	g2 := e.commit(t, keyA, "berth-runtime-2")
	e.pass(t)
	if err := e.set.Serves(int64(g1)); !errors.Is(err, direct.ErrNotServed) {
		t.Fatalf("generation 1 still served: %v", err)
	}
	must(t, e.set.Serves(int64(g2)))
	// Closing waits for generation 1's adapter, whose fence still counts
	// the held call.
	closed := make(chan struct{})
	go func() {
		_ = e.set.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("the Set closed while a call of generation 1 still ran")
	case err := <-done:
		t.Fatalf("the held call ended before its release: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the held call: %v", err)
	}
	<-closed
}

// TestBackendMismatchIsNeverServed: an adapter whose backend fingerprint
// differs from the one first recorded for its generation (another team's
// namespace) is recorded not ready with backend_fingerprint_mismatch and
// nothing is sent through it.
func TestBackendMismatchIsNeverServed(t *testing.T) {
	e := newEnv(t)
	g := e.commit(t, keyA, "berth-runtime")
	ctx := context.Background()
	_, err := e.st.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(g), Ready: false,
		DiagnosticCode: "probe_failed", BackendFingerprint: "memdirect:elsewhere:team:other"})
	must(t, err)
	e.pass(t)
	r := e.readiness(t, g)
	if r.Ready || r.DiagnosticCode != direct.CodeBackendMismatch || r.BackendFingerprint != "memdirect:elsewhere:team:other" {
		t.Fatalf("readiness %+v", r)
	}
	wantReason(t, e.set.Serves(int64(g)), direct.CodeBackendMismatch)
}

// TestRestartRebuildsFromTheStore: a Core that starts (a new Set over the
// same store) rebuilds each wanted generation from its stored selectors
// and sealed credential and serves it; when the vendor no longer accepts
// the stored key, the build failure is recorded not ready with the
// adapter's fixed reason and nothing is served.
func TestRestartRebuildsFromTheStore(t *testing.T) {
	e := newEnv(t)
	g := e.commit(t, keyA, "berth-runtime")
	restarted := func() *direct.Set { return e.restartedSet(t) }
	must(t, restarted().Serves(int64(g)))
	if r := e.readiness(t, g); !r.Ready {
		t.Fatalf("after the rebuild: %+v", r)
	}

	e.vendor.RemoveKey(keyA)
	s := restarted()
	if err := s.Serves(int64(g)); !errors.Is(err, direct.ErrNotServed) {
		t.Fatalf("served with a rejected key: %v", err)
	}
	if r := e.readiness(t, g); r.Ready || r.DiagnosticCode != "credential_rejected" {
		t.Fatalf("readiness %+v, want not ready credential_rejected", r)
	}
}

// restartedSet is the Set of a Core that starts over the same store: new,
// serving nothing before its first pass, then passed once.
func (e *env) restartedSet(t *testing.T) *direct.Set {
	t.Helper()
	s := direct.New(direct.Config{Store: e.st, Registry: e.reg, Key: e.key, InstallationID: e.inst.ID,
		Paths: sandbox.ProcessPaths{Root: "/usr/lib/berth", State: t.TempDir()}, RuntimeGateway: true})
	t.Cleanup(func() { _ = s.Close() })
	cur, err := e.deploy.Get(context.Background())
	must(t, err)
	if err := s.Serves(int64(cur.Generation)); !errors.Is(err, direct.ErrNotServed) {
		t.Fatalf("served before its first pass: %v", err)
	}
	must(t, s.Pass(context.Background()))
	return s
}
