package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/lifecycle"
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

// directEnv is a deployment of one E2B generation over the loopback E2B
// fixture, ready, with the real adapter built through the production
// registry's checked construction path as Core builds it, and a
// lifecycle Config whose direct lane calls it.
type directEnv struct {
	st  *storetest.Owned
	cfg lifecycle.Config
	svc *sessions.Service
	e2b *e2btest.Fixture
	rec *recorder
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
	f := e2btest.Start(t)
	reg, err := providers.Default()
	must(t, err)
	enc, err := reg.Normalize(e2b.Kind, sandbox.ConfigurationInput{Public: f.Public(), Credential: e2btest.Credential(f.Key)})
	must(t, err)
	gen, err := st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: e2b.Kind, PublicConfig: enc.Public, Observations: enc.Observations,
		Specification: spec, Mode: store.ModeDirect,
	})
	must(t, err)
	_, err = st.RecordDirectReadiness(ctx, store.DirectReadiness{Generation: int64(gen.Generation), Ready: true})
	must(t, err)
	built, err := reg.BuildDirect(ctx, e2b.Kind, providers.DirectRequest{
		Deployment:     sandbox.EncodedConfiguration{Public: enc.Public, Observations: enc.Observations},
		Credential:     enc.Secret,
		Specification:  spec,
		InstallationID: inst.ID.String(),
		Generation:     gen.Generation,
		Paths:          providers.ProcessPaths{Root: "/usr/lib/berth", State: t.TempDir()},
	})
	must(t, err)
	t.Cleanup(func() { _ = built.Close() })

	e := &directEnv{st: st, e2b: f, rec: &recorder{SandboxProvider: built.Provider, renews: map[string]int{}}}
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

// e2bCalls counts the fixture's calls by name (create, list, get,
// timeout, kill; start, input... on envd).
func (e *directEnv) e2bCalls(name string) int {
	n := 0
	for _, c := range e.e2b.Calls() {
		if c.Name == name {
			n++
		}
	}
	return n
}

// TestDirectLaneCreatesOnceKillsAndReleases: the direct lane's worker
// sends one Create for a direct Session, records it settled running, and
// after deletion Kills the E2B sandbox and releases the allocation;
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
	if n := len(e.rec.createsOf(a.ID)); n != 1 || e.e2bCalls("create") != 1 || len(e.e2b.Sandboxes()) != 1 {
		t.Fatalf("%d Creates sent, E2B received %d creates and holds %d sandboxes, want 1 each", n, e.e2bCalls("create"), len(e.e2b.Sandboxes()))
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
	if len(e.e2b.Sandboxes()) != 0 {
		t.Fatalf("E2B still holds %d sandboxes", len(e.e2b.Sandboxes()))
	}
	held, err := e.st.DirectHeld(context.Background())
	must(t, err)
	if held != 0 {
		t.Fatalf("the direct lane holds %d after release", held)
	}
}

// TestDirectLaneNeverReplaysALostCreate: a create POST whose answer was
// lost (E2B made the sandbox, the adapter never learnt it) is an unknown
// outcome (ErrComputeUnconfirmed). The worker observes it by the
// adapter's metadata listing, which finds the sandbox but no Runtime in
// it (its bootstrap was never delivered): no settlement evidence, so it
// stays unknown and is never sent again. Once CreateAbandonAfter has
// passed the worker abandons it: the Kill removes the sandbox, the next
// listing settles absence, the allocation is released, and the Session's
// next allocation runs. E2B received one create per allocation.
func TestDirectLaneNeverReplaysALostCreate(t *testing.T) {
	e := newDirectEnv(t, 4)
	e.cfg.CreateAbandonAfter = time.Second
	w := lifecycle.NewWorker(e.cfg, lifecycle.DirectLane)
	e.e2b.Arm("create", e2btest.FaultLostAnswer, nil)
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
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationCreateUnknown {
		t.Fatalf("a lost Create whose sandbox has no Runtime: %s, want create_unknown", brief(a))
	}
	if sbs := e.e2b.Sandboxes(); len(sbs) != 1 || sbs[0].Metadata[e2b.MetaAllocation] != b.Allocation.ID.String() ||
		e.e2bCalls("create") != 1 || e.e2bCalls("kill") != 0 {
		t.Fatalf("E2B holds %d sandboxes, received %d creates and %d kills; want the lost one, once, not killed",
			len(sbs), e.e2bCalls("create"), e.e2bCalls("kill"))
	}

	time.Sleep(1100 * time.Millisecond)
	for range 3 {
		pass(t, w)
	}
	if a := e.alloc(t, b.Allocation.ID); a.CreateAbandonedAt == nil || a.State != store.AllocationReleased || !a.AbsenceReceipt {
		t.Fatalf("after abandonment: %s", brief(a))
	}
	sess, err := e.st.GetSession(context.Background(), b.Session.ID)
	must(t, err)
	next := sess.Allocation
	if next.ID == b.Allocation.ID || next.State != store.AllocationRunning || !next.CreateSettled {
		t.Fatalf("the Session's next allocation: %s", brief(next))
	}
	if sbs := e.e2b.Sandboxes(); len(sbs) != 1 || sbs[0].Metadata[e2b.MetaAllocation] != next.ID.String() {
		t.Fatalf("E2B holds %+v, want the next allocation's sandbox only", sbs)
	}
	creates := map[string]int{}
	for _, r := range e.e2b.Requests() {
		if r.Call == "create" {
			creates[r.Allocation]++
		}
	}
	if creates[b.Allocation.ID.String()] != 1 || creates[next.ID.String()] != 1 || len(creates) != 2 {
		t.Fatalf("create POSTs per allocation %v, want one each (never replayed)", creates)
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
	if a.State != store.AllocationAllocated || a.CreateDispatchedAt != nil || len(e.rec.createsOf(a.ID)) != 0 || e.e2bCalls("create") != 0 {
		t.Fatalf("a Create was claimed or sent while not served: %s", brief(a))
	}
	e.serves = nil
	pass(t, w)
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationRunning || !a.CreateSettled || e.e2bCalls("create") != 1 {
		t.Fatalf("served: %s, %d creates at E2B", brief(a), e.e2bCalls("create"))
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
	if r, n := e.rec.renewsOf(b.Allocation.ID), e.e2bCalls("timeout"); r != 1 || n != 1 {
		t.Fatalf("%d keepalives while the Turn runs, E2B received %d timeout extensions; want 1 each", r, n)
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
