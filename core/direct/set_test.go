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
	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/suspension"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

// The leases of the generations the tests commit: a change of lease is a
// new generation with the same template.
const (
	lease1 = 900
	lease2 = 1200
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

// env is an installation whose deployment service commits E2B
// generations pointed at the loopback E2B fixture (sealed credentials,
// as Core commits them) and a Set over the production registry, so every
// generation's adapter is the real E2B adapter built by its
// registration.
type env struct {
	st   *storetest.Owned
	reg  *providers.Registry
	inst store.Installation
	key  secrets.Key
	e2b  *e2btest.Fixture
	// keyA is the fixture's default key, of team-a.
	keyA   string
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
	f := e2btest.Start(t)
	reg, err := providers.Default()
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
	return &env{st: st, reg: reg, inst: inst, key: key, e2b: f, keyA: f.Key, deploy: deploy, set: set, svc: svc}
}

// public is the public object pointing both planes at the fixture, with
// lease seconds.
func (e *env) public(lease int) json.RawMessage {
	data, _ := json.Marshal(map[string]any{"api_url": e.e2b.URL, "sandbox_url": e.e2b.URL, "template": e2btest.Template, "lease_seconds": lease})
	return data
}

// commit commits (or replaces with) an E2B generation with key and lease.
func (e *env) commit(t *testing.T, key string, lease int) uint64 {
	t.Helper()
	g, err := e.commitErr(key, lease)
	must(t, err)
	return g
}

func (e *env) commitErr(key string, lease int) (uint64, error) {
	ctx := context.Background()
	c := deployment.Candidate{
		ProviderKind:  e2b.Kind,
		Public:        e.public(lease),
		Credential:    e2btest.Credential(key),
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
	r, err := e.deploy.Replace(ctx, c, nil, cur.Generation, store.NewAdminProvenance(uuid.New()))
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

// waitForCall waits until the fixture has received a call named name
// since its last ResetCalls.
func (e *env) waitForCall(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, c := range e.e2b.Calls() {
			if c.Name == name {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("E2B never received %s", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noCalls fails the test when the fixture received anything since its
// last ResetCalls.
func (e *env) noCalls(t *testing.T) {
	t.Helper()
	if calls := e.e2b.Calls(); len(calls) != 0 {
		t.Fatalf("E2B received %v", calls)
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
// generation's adapter (E2B holds one sandbox with the allocation's
// metadata).
func TestPassBuildsProbesAndServes(t *testing.T) {
	e := newEnv(t)
	g := e.commit(t, e.keyA, lease1)
	// The commit published the candidate built and probed before it.
	must(t, e.set.Serves(int64(g)))
	e.pass(t)
	r := e.readiness(t, g)
	if !r.Ready || !r.Fresh || r.BackendFingerprint != "e2b:"+e.e2b.URL {
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
	sbs := e.e2b.Sandboxes()
	if !info.IsSettledRunning(b.Allocation.Reference()) || len(sbs) != 1 || sbs[0].ID != info.ProviderID ||
		sbs[0].Metadata[e2b.MetaAllocation] != b.Allocation.ID.String() || sbs[0].Metadata[e2b.MetaInstallation] != e.inst.ID.String() {
		t.Fatalf("create: %+v, E2B holds %+v", info, sbs)
	}
}

// TestRejectedCandidateWritesNothing: a direct candidate whose key E2B
// rejects is refused before any write (deployment_candidate_not_ready
// naming credential_rejected, never the key), and nothing is committed;
// the same candidate with a valid key commits.
func TestRejectedCandidateWritesNothing(t *testing.T) {
	e := newEnv(t)
	const unknown = "e2b_unknownkey0123456789abcdef0123456"
	_, err := e.commitErr(unknown, lease1)
	wantReason(t, err, "deployment_candidate_not_ready")
	if !strings.Contains(err.Error(), "credential_rejected") || strings.Contains(err.Error(), unknown) {
		t.Fatalf("refusal %q", err)
	}
	d, err := e.deploy.Get(context.Background())
	must(t, err)
	if d.Generation != 0 {
		t.Fatalf("generation %d committed", d.Generation)
	}
	if g := e.commit(t, e.keyA, lease1); g != 1 {
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
	_, err := set.Prepare(context.Background(), deployment.DirectCandidate{Generation: 1, Kind: e2b.Kind})
	wantReason(t, err, "public_origin_required")
	if r := e.e2b.Requests(); len(r) != 0 {
		t.Fatalf("E2B received %v", r)
	}
}

// TestFailingProbeIsRecordedAndRetried: a served generation whose key E2B
// stops accepting (revoked) is recorded not ready with the probe's code,
// gets no new Create (Serves), and Sessions are refused; once the key is
// accepted again the next pass records it ready.
func TestFailingProbeIsRecordedAndRetried(t *testing.T) {
	e := newEnv(t)
	revoked := e.e2b.AddTeam("team-c")
	g := e.commit(t, revoked, lease1)
	e.e2b.RevokeKey(revoked)
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

	e.e2b.RestoreKey(revoked)
	e.pass(t)
	if r := e.readiness(t, g); !r.Ready {
		t.Fatalf("after the key came back: %+v", r)
	}
	must(t, e.set.Serves(int64(g)))
}

// TestProviderRefusesWhatIsNotADirectAllocation: a Reference that is not
// exactly a direct allocation Core recorded (an unknown allocation, or a
// recorded one with another tenant) is refused and E2B receives nothing.
func TestProviderRefusesWhatIsNotADirectAllocation(t *testing.T) {
	e := newEnv(t)
	e.commit(t, e.keyA, lease1)
	e.pass(t)
	b := e.session(t)
	e.e2b.ResetCalls()
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
	e.noCalls(t)
}

// TestUnwantedGenerationIsClosedAfterItsCalls: a generation replaced by
// another while it holds nothing stops being served at the next pass, and
// its adapter is closed only after its fence excluded the call still
// running on it (Close waits for that); the new one is built and served.
func TestUnwantedGenerationIsClosedAfterItsCalls(t *testing.T) {
	e := newEnv(t)
	g1 := e.commit(t, e.keyA, lease1)
	e.pass(t)
	b := e.session(t)
	ctx := context.Background()
	_, err := e.set.Provider().Create(ctx, createRequest(b.Allocation))
	must(t, err)

	// A GetInfo on generation 1 is held inside E2B (its listing) while the
	// generation stops being wanted.
	e.e2b.ResetCalls()
	e.e2b.Arm("list", e2btest.FaultHang, nil)
	done := make(chan error, 1)
	go func() {
		_, err := e.set.Provider().GetInfo(ctx, b.Allocation.Reference())
		done <- err
	}()
	e.waitForCall(t, "list")
	_, err = e.svc.Delete(ctx, projects.All(), b.Session.ID)
	must(t, err)
	a, err := e.st.GetAllocation(ctx, b.Allocation.ID)
	must(t, err)
	storetest.Release(t, e.st, a)
	g2 := e.commit(t, e.keyA, lease2)
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
	e.e2b.Release()
	if err := <-done; err != nil {
		t.Fatalf("the held call: %v", err)
	}
	<-closed
}

// TestBackendMismatchIsNeverServed: an adapter whose backend fingerprint
// differs from the one first recorded for its generation (another E2B
// endpoint) is recorded not ready with backend_fingerprint_mismatch and
// nothing is sent through it.
func TestBackendMismatchIsNeverServed(t *testing.T) {
	e := newEnv(t)
	g := e.commit(t, e.keyA, lease1)
	ctx := context.Background()
	const elsewhere = "e2b:https://api.elsewhere.example"
	_, err := e.st.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(g), Ready: false,
		DiagnosticCode: "probe_failed", BackendFingerprint: elsewhere})
	must(t, err)
	e.pass(t)
	r := e.readiness(t, g)
	if r.Ready || r.DiagnosticCode != direct.CodeBackendMismatch || r.BackendFingerprint != elsewhere {
		t.Fatalf("readiness %+v", r)
	}
	wantReason(t, e.set.Serves(int64(g)), direct.CodeBackendMismatch)
}

// TestRestartRebuildsFromTheStore: a Core that starts (a new Set over the
// same store) rebuilds each wanted generation from its stored selectors
// and sealed credential and serves it; when E2B no longer accepts the
// stored key (revoked), the probe failure is recorded not ready with the
// adapter's fixed reason and nothing is served.
func TestRestartRebuildsFromTheStore(t *testing.T) {
	e := newEnv(t)
	g := e.commit(t, e.keyA, lease1)
	restarted := func() *direct.Set { return e.restartedSet(t) }
	must(t, restarted().Serves(int64(g)))
	if r := e.readiness(t, g); !r.Ready {
		t.Fatalf("after the rebuild: %+v", r)
	}

	e.e2b.RevokeKey(e.keyA)
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
