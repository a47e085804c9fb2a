package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/internal/memdirect"
	"berth.dev/core/lifecycle"
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

const directKey = "e2b_directlanetestkey0123456789abcdef"

// recorder forwards to a direct adapter and records what the lifecycle
// sent it: the Create requests (with their bootstrap files) and the
// Renews per allocation.
type recorder struct {
	sandbox.SandboxProvider
	mu      sync.Mutex
	creates []sandbox.CreateRequest
	// createErrs are the Creates' errors, in order.
	createErrs []error
	renews     map[string]int
}

func (r *recorder) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	info, err := r.SandboxProvider.Create(ctx, req)
	r.mu.Lock()
	r.creates = append(r.creates, req)
	r.createErrs = append(r.createErrs, err)
	r.mu.Unlock()
	return info, err
}

func (r *recorder) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	r.mu.Lock()
	r.renews[ref.AllocationID]++
	r.mu.Unlock()
	return r.SandboxProvider.Renew(ctx, ref)
}

func (r *recorder) createsOf(a uuid.UUID) []sandbox.CreateRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sandbox.CreateRequest
	for _, c := range r.creates {
		if c.Reference.AllocationID == a.String() {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) renewsOf(a uuid.UUID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renews[a.String()]
}

// refusingNode is a node's provider that fails the test on any call: the
// direct lane's allocations must never reach a node.
type refusingNode struct {
	sandbox.SandboxProvider
	t *testing.T
}

func (n refusingNode) Create(context.Context, sandbox.CreateRequest) (sandbox.Info, error) {
	n.t.Error("a node received a Create")
	return sandbox.Info{}, errdefs.ErrObservationUnavailable
}

func (n refusingNode) GetInfo(context.Context, sandbox.Reference) (sandbox.Info, error) {
	n.t.Error("a node received a GetInfo")
	return sandbox.Info{}, errdefs.ErrObservationUnavailable
}

func (n refusingNode) Kill(context.Context, sandbox.KillRequest) error {
	n.t.Error("a node received a Kill")
	return errdefs.ErrObservationUnavailable
}

// directEnv is a deployment of one memdirect generation, ready, with its
// adapter built through the registry's checked construction path as Core
// builds it, and a lifecycle Config whose direct lane calls it.
type directEnv struct {
	st     *storetest.Owned
	cfg    lifecycle.Config
	svc    *sessions.Service
	vendor *memdirect.Vendor
	rec    *recorder
	// serves is what Config.Serves answers (nil: served).
	serves error
}

func newDirectEnv(t *testing.T, maxActive int32) *directEnv {
	t.Helper()
	ctx := context.Background()
	base := storetest.New(t)
	inst, err := base.ClaimInstallation(ctx, uuid.New(), "https://core.example:8443")
	must(t, err)
	st := storetest.Owner(t, base)
	key, _, err := secrets.NewKey()
	must(t, err)
	spec := sandbox.Specification{Resources: resources, MaxActive: maxActive, MaxRetained: maxActive}
	gen, err := st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: memdirect.Kind, PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: spec, Mode: store.ModeDirect,
	})
	must(t, err)
	_, err = st.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(gen.Generation), Ready: true})
	must(t, err)

	v := memdirect.NewVendor()
	v.AddKey(directKey, "team-a")
	reg, err := providers.NewRegistry(memdirect.Registration(v))
	must(t, err)
	enc, err := reg.Normalize(memdirect.Kind, sandbox.ConfigurationInput{
		Public:     json.RawMessage(`{"template":"berth-runtime"}`),
		Credential: sandbox.NewCredential([]byte(`{"api_key":"` + directKey + `"}`)),
	})
	must(t, err)
	built, err := reg.BuildDirect(ctx, memdirect.Kind, providers.DirectRequest{
		Deployment:     sandbox.EncodedConfiguration{Public: enc.Public, Observations: enc.Observations},
		Credential:     enc.Secret,
		Specification:  spec,
		InstallationID: inst.ID.String(),
		Generation:     gen.Generation,
		Paths:          providers.ProcessPaths{Root: "/usr/lib/berth", State: "/var/lib/berth/providers"},
	})
	must(t, err)
	t.Cleanup(func() { _ = built.Close() })

	e := &directEnv{st: st, vendor: v, rec: &recorder{SandboxProvider: built.Provider, renews: map[string]int{}}}
	e.cfg = lifecycle.Config{
		Store: st, Suspension: suspension.New(st, nil), Key: key, Installation: inst,
		Provider: func(id uuid.UUID) (sandbox.SandboxProvider, error) {
			if id == lifecycle.DirectLane {
				return e.rec, nil
			}
			return refusingNode{SandboxProvider: e.rec, t: t}, nil
		},
		Serves: func(generation int64) error {
			if generation != int64(gen.Generation) {
				t.Errorf("Serves(%d) asked", generation)
			}
			return e.serves
		},
		CallTimeout: 5 * time.Second,
		Interval:    20 * time.Millisecond,
	}
	e.svc = sessions.New(st, key, inst.ID, uuid.New, e.cfg.Suspension.(*suspension.Service), nil)
	e.cfg.Admission = e.svc
	return e
}

func (e *directEnv) create(t *testing.T) store.SessionBundle {
	t.Helper()
	b, err := e.svc.Create(context.Background(), projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "s"})
	must(t, err)
	if b.Allocation.NodeID != lifecycle.DirectLane {
		t.Fatalf("placed on node %s, want the direct lane", b.Allocation.NodeID)
	}
	return b
}

func (e *directEnv) alloc(t *testing.T, id uuid.UUID) store.Allocation {
	t.Helper()
	a, err := e.st.GetAllocation(context.Background(), id)
	must(t, err)
	return a
}

// vendorCalls counts the vendor's calls by name.
func (e *directEnv) vendorCalls(name string) int {
	n := 0
	for _, c := range e.vendor.Calls() {
		if c.Name == name {
			n++
		}
	}
	return n
}

// TestDirectLaneCreatesOnceKillsAndReleases: the direct lane's worker
// sends one Create for a direct Session, records it settled running, and
// after deletion Kills the vendor's sandbox and releases the allocation;
// a node's worker beside it never sends anything about it.
func TestDirectLaneCreatesOnceKillsAndReleases(t *testing.T) {
	e := newDirectEnv(t, 4)
	w := lifecycle.NewWorker(e.cfg, lifecycle.DirectLane)
	nodeWorker := lifecycle.NewWorker(e.cfg, storetest.EnabledNode(t, e.st))
	b := e.create(t)
	for range 3 {
		pass(t, w)
		pass(t, nodeWorker)
	}
	a := e.alloc(t, b.Allocation.ID)
	if a.State != store.AllocationRunning || !a.CreateSettled || a.ProviderID == "" {
		t.Fatalf("allocation %s", brief(a))
	}
	if n := len(e.rec.createsOf(a.ID)); n != 1 || e.vendorCalls("create") != 1 || e.vendor.Len() != 1 {
		t.Fatalf("%d Creates sent, vendor saw %d creates and holds %d sandboxes, want 1 each", n, e.vendorCalls("create"), e.vendor.Len())
	}

	_, err := e.svc.Delete(context.Background(), projects.All(), b.Session.ID)
	must(t, err)
	for range 3 {
		pass(t, w)
		pass(t, nodeWorker)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationReleased {
		t.Fatalf("after deletion: %s", brief(a))
	}
	if e.vendor.Len() != 0 {
		t.Fatalf("the vendor still holds %d sandboxes", e.vendor.Len())
	}
	held, err := e.st.DirectHeld(context.Background())
	must(t, err)
	if held != 0 {
		t.Fatalf("the direct lane holds %d after release", held)
	}
}

// TestDirectLaneNeverReplaysALostCreate: a Create whose answer was lost is
// an unknown outcome (ErrComputeUnconfirmed); the worker observes it by
// the adapter's metadata listing and settles it running, and the vendor
// received exactly one create.
func TestDirectLaneNeverReplaysALostCreate(t *testing.T) {
	e := newDirectEnv(t, 4)
	w := lifecycle.NewWorker(e.cfg, lifecycle.DirectLane)
	e.vendor.LoseAnswer("create")
	b := e.create(t)
	for range 3 {
		pass(t, w)
	}
	e.rec.mu.Lock()
	errs := e.rec.createErrs
	e.rec.mu.Unlock()
	if len(errs) != 1 || !errors.Is(errs[0], errdefs.ErrComputeUnconfirmed) {
		t.Fatalf("Create outcomes %v, want one unconfirmed", errs)
	}
	a := e.alloc(t, b.Allocation.ID)
	if a.State != store.AllocationRunning || !a.CreateSettled || a.ProviderID == "" {
		t.Fatalf("the lost Create did not settle by observation: %s", brief(a))
	}
	if got := e.vendorCalls("create"); got != 1 {
		t.Fatalf("the vendor received %d creates, want 1 (never replayed)", got)
	}
}

// TestDirectLaneWaitsWhileNotServed: while Config.Serves refuses the
// generation (an adapter not built, or fenced by a key change), no
// receipt is claimed and nothing is sent; once served, the one Create is.
func TestDirectLaneWaitsWhileNotServed(t *testing.T) {
	e := newDirectEnv(t, 4)
	w := lifecycle.NewWorker(e.cfg, lifecycle.DirectLane)
	e.serves = errors.New("not built")
	b := e.create(t)
	for range 3 {
		pass(t, w)
	}
	a := e.alloc(t, b.Allocation.ID)
	if a.State != store.AllocationAllocated || a.CreateDispatchedAt != nil || len(e.rec.createsOf(a.ID)) != 0 || e.vendorCalls("create") != 0 {
		t.Fatalf("a Create was claimed or sent while not served: %s", brief(a))
	}
	e.serves = nil
	pass(t, w)
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationRunning || !a.CreateSettled || e.vendorCalls("create") != 1 {
		t.Fatalf("served: %s, %d vendor creates", brief(a), e.vendorCalls("create"))
	}
}

// TestDirectLaneKeepsALeaseAliveDuringATurn: on the direct lane the
// keepalive (Renew, E2B's timeout extension) goes on while a Turn runs,
// because a native lease ends compute mid-Turn; a node's worker sends
// none then (TestNoKeepaliveWhileATurnRuns).
func TestDirectLaneKeepsALeaseAliveDuringATurn(t *testing.T) {
	e := newDirectEnv(t, 4)
	e.cfg.ObservePeriod = time.Hour
	e.cfg.KeepaliveInterval = time.Hour
	w := lifecycle.NewWorker(e.cfg, lifecycle.DirectLane)
	b := e.create(t)
	for range 3 {
		pass(t, w)
	}
	ctx := context.Background()
	reqs := e.rec.createsOf(b.Allocation.ID)
	if len(reqs) != 1 {
		t.Fatalf("%d Creates", len(reqs))
	}
	g, err := e.st.AcceptRuntime(ctx, store.AcceptRuntimeParams{
		ConnectionID: uuid.New(), DeviceID: b.Allocation.DeviceID,
		Credential: runtimebootstrap.NewSecret(reqs[0].Bootstrap.Credential.Reveal()), RuntimeVersion: "test",
	})
	must(t, err)
	startTurn(t, e.st, g, b.Session.ID)

	pass(t, w)
	if r := e.rec.renewsOf(b.Allocation.ID); r != 1 {
		t.Fatalf("%d keepalives while the Turn runs, want 1", r)
	}
	if a := e.alloc(t, b.Allocation.ID); a.Observation.KeepaliveAt == nil {
		t.Fatal("the keepalive was not recorded")
	}
	pass(t, w)
	if r := e.rec.renewsOf(b.Allocation.ID); r != 1 {
		t.Fatalf("%d keepalives within the interval, want 1", r)
	}
}

// TestNodeWorkersNeverAskServes: Config.Serves is the direct lane's: a
// node's worker creates its Session's compute although Serves refuses
// every generation (core/daemon gives the one Config to every worker).
func TestNodeWorkersNeverAskServes(t *testing.T) {
	e := newEnv(t, 1)
	e.cfg.Serves = func(int64) error { return errors.New("the direct lane serves nothing") }
	n := e.only(t)
	w := lifecycle.NewWorker(e.cfg, n.id)
	b := e.createSession(t, n.id)
	for range 3 {
		pass(t, w)
	}
	if a := e.alloc(t, b.ID); a.State != store.AllocationRunning || !a.CreateSettled {
		t.Fatalf("a node's allocation under a refusing Serves: %s", brief(a))
	}
}
