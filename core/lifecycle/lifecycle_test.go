package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"berth.dev/core/deployment"
	"berth.dev/core/deployment/deploymenttest"
	"berth.dev/core/lifecycle"
	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/suspension"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

const fixtureImage = "sha256:4f3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c"

var resources = sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// node is an enabled node with its own Docker Engine fixture and the real
// Docker adapter over it.
type node struct {
	id  uuid.UUID
	srv *dockertest.Server
	p   *docker.Provider
}

type env struct {
	st    *storetest.Owned
	inst  store.Installation
	cfg   lifecycle.Config
	svc   *sessions.Service
	nodes map[uuid.UUID]*node
	// place is the node the next session is placed on.
	place uuid.UUID
	// failures are the owner failures the coordinator recorded.
	failures *ownerFailures
}

// ownerFailures records the owner failures reported to
// lifecycle.Config.OwnerFailures (core/daemon: audit.Writer).
type ownerFailures struct {
	mu    sync.Mutex
	nodes [][]uuid.UUID
}

func (f *ownerFailures) OwnerFailure(_ string, nodes []uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = append(f.nodes, nodes)
}

func (f *ownerFailures) count() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.nodes) }

func newEnv(t *testing.T, nodes int) *env {
	t.Helper()
	return newEnvMax(t, nodes, 8)
}

// newEnvMax is newEnv with a deployment that allows maxActive allocations
// per node.
func newEnvMax(t *testing.T, nodes int, maxActive int32) *env {
	t.Helper()
	return newEnvSpec(t, nodes, sandbox.Specification{Resources: resources, MaxActive: maxActive, MaxRetained: maxActive})
}

// newEnvSpec is newEnv with a deployment of specification spec.
func newEnvSpec(t *testing.T, nodes int, spec sandbox.Specification) *env {
	t.Helper()
	ctx := context.Background()
	base := storetest.New(t)
	inst, err := base.ClaimInstallation(ctx, uuid.New(), "https://core.example:8443")
	must(t, err)
	st := storetest.Owner(t, base)
	key, _, err := secrets.NewKey()
	must(t, err)
	_, err = st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: spec,
	})
	must(t, err)
	e := &env{st: st, inst: inst, nodes: map[uuid.UUID]*node{}}
	for range nodes {
		n := &node{id: storetest.EnabledNode(t, st), srv: dockertest.Start(t)}
		n.srv.PutImage(fixtureImage)
		cli, err := docker.NewClient(n.srv.Host())
		must(t, err)
		t.Cleanup(func() { _ = cli.Close() })
		_, err = cli.ServerVersion(ctx, client.ServerVersionOptions{})
		must(t, err)
		n.p = docker.New(cli, docker.Options{
			InstallationID: inst.ID.String(),
			Config:         docker.NodeConfig{Image: fixtureImage, Network: "none"},
			Seccomp:        []byte(`{"defaultAction":"SCMP_ACT_ERRNO"}`),
			Resources:      resources,
		})
		e.nodes[n.id] = n
		e.place = n.id
	}
	e.cfg = lifecycle.Config{
		Store: st, Suspension: suspension.New(st, nil), Key: key, Installation: inst,
		Provider: func(id uuid.UUID) (sandbox.SandboxProvider, error) {
			return e.nodes[id].p, nil
		},
		CallTimeout: 20 * time.Second,
		Interval:    20 * time.Millisecond,
	}
	e.svc = sessions.New(st, key, inst.ID, uuid.New, e.cfg.Suspension.(*suspension.Service), nil)
	// As Core wires it (core/daemon): an owner failure closes admission
	// and is recorded.
	e.cfg.Admission = e.svc
	e.failures = &ownerFailures{}
	e.cfg.OwnerFailures = e.failures
	return e
}

func (e *env) createSession(t *testing.T, on uuid.UUID) store.Allocation {
	return e.createBundle(t, on).Allocation
}

func (e *env) createBundle(t *testing.T, on uuid.UUID) store.SessionBundle {
	t.Helper()
	// Placement reads durable presence: only node on is present, ready for
	// the current generation.
	gen, err := e.st.CurrentGeneration(context.Background())
	must(t, err)
	for id := range e.nodes {
		storetest.Present(t, e.st, id, gen.Generation)
		if id != on {
			storetest.Absent(t, e.st, id)
		}
	}
	e.place = on
	b, err := e.svc.Create(context.Background(), projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "s"})
	must(t, err)
	if b.Allocation.NodeID != on {
		t.Fatalf("placed on %s, want %s", b.Allocation.NodeID, on)
	}
	return b
}

func (e *env) alloc(t *testing.T, id uuid.UUID) store.Allocation {
	t.Helper()
	a, err := e.st.GetAllocation(context.Background(), id)
	must(t, err)
	return a
}

// wantHeld fails the test unless node holds want Environments (unreleased
// placements or allocations, what max_active bounds); when says at which
// point, for the failure.
func (e *env) wantHeld(t *testing.T, node uuid.UUID, want int64, when string) {
	t.Helper()
	held, err := e.st.NodeHeld(context.Background(), node)
	must(t, err)
	if held != want {
		t.Fatalf("node holds %d %s, want %d", held, when, want)
	}
}

// wantNextSessionRuns checks that node's freed max_active slot serves
// again: a next Session is placed on node and w's pass runs it.
func (e *env) wantNextSessionRuns(t *testing.T, w *lifecycle.Worker, node uuid.UUID) {
	t.Helper()
	next := e.createSession(t, node)
	pass(t, w)
	if got := e.alloc(t, next.ID); got.State != store.AllocationRunning || !got.CreateSettled {
		t.Fatalf("the next Session's allocation: %s", brief(got))
	}
}

func count(srv *dockertest.Server, call string) int {
	n := 0
	for _, c := range srv.CallNames() {
		if c == call {
			n++
		}
	}
	return n
}

func (e *env) only(t *testing.T) *node {
	for _, n := range e.nodes {
		return n
	}
	t.Fatal("no node")
	return nil
}

func pass(t *testing.T, w *lifecycle.Worker) {
	t.Helper()
	must(t, w.Pass(context.Background()))
}

func TestWorkerCreatesOnceAndRecordsRunning(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	a := e.createSession(t, n.id)
	w := lifecycle.NewWorker(e.cfg, n.id)
	for range 3 {
		pass(t, w)
	}
	got := e.alloc(t, a.ID)
	if got.State != store.AllocationRunning || !got.CreateSettled || got.ProviderID == "" {
		t.Fatalf("allocation %+v", got)
	}
	if c := count(n.srv, dockertest.CallContainerCreate); c != 1 {
		t.Fatalf("container.create %d times", c)
	}
	pl, err := e.st.GetPlacement(context.Background(), a.EnvironmentID)
	must(t, err)
	if pl.State != store.PlacementActive {
		t.Fatalf("placement %s", pl.State)
	}
	// The bootstrap carries the device id and the sealed credential, whose
	// digest is the stored one; the credential reaches no call's query.
	name := n.p.Name(a.Reference())
	found := false
	for _, ar := range n.srv.Archives(name) {
		for _, f := range ar.Entries {
			if !strings.HasSuffix(f.Header.Name, "runtime-bootstrap.json") {
				continue
			}
			var file struct{ CoreURL, DeviceID, Credential string }
			var raw map[string]any
			must(t, json.Unmarshal(f.Content, &raw))
			file.CoreURL, _ = raw["core_url"].(string)
			file.DeviceID, _ = raw["device_id"].(string)
			file.Credential, _ = raw["credential"].(string)
			if file.CoreURL != e.inst.PublicURL || file.DeviceID != a.DeviceID.String() ||
				hex.EncodeToString(sessions.Digest(file.Credential)) != hex.EncodeToString(a.CredentialDigest) {
				t.Fatal("bootstrap file does not carry the allocation's identity")
			}
			for _, c := range n.srv.Calls() {
				if strings.Contains(c.Query.Encode(), file.Credential) || strings.Contains(c.Path, file.Credential) {
					t.Fatal("credential in a call's path or query")
				}
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no bootstrap file copied")
	}
}

func TestUnknownCreateIsNeverReplayedAndSettlesByObservation(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(srv *dockertest.Server, cancel context.CancelFunc)
		// appear makes the container show up (running) in the fixture.
		appear func(n *node, ref sandbox.Reference)
	}{
		{
			name: "dropped",
			arm: func(srv *dockertest.Server, _ context.CancelFunc) {
				srv.Arm(dockertest.CallContainerCreate, dockertest.FaultDrop, nil)
			},
			appear: func(n *node, ref sandbox.Reference) {
				n.srv.PutContainer(n.p.Name(ref), n.p.Labels(ref), dockertest.StateRunning)
			},
		},
		{
			name: "cancelled after dispatch",
			arm: func(srv *dockertest.Server, cancel context.CancelFunc) {
				srv.Arm(dockertest.CallContainerCreate, dockertest.FaultCancelAfterDispatch, cancel)
			},
			appear: func(n *node, ref sandbox.Reference) {
				if !n.srv.SetContainerState(n.p.Name(ref), dockertest.StateRunning) {
					panic("the dispatched container is missing")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			n := e.only(t)
			a := e.createSession(t, n.id)
			w := lifecycle.NewWorker(e.cfg, n.id)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.arm(n.srv, cancel)
			_ = w.Pass(ctx) // may end with ctx's cancellation
			if got := e.alloc(t, a.ID); got.State != store.AllocationCreateUnknown || got.CreateSettled || got.AbsenceReceipt {
				t.Fatalf("after the failed Create: %s", brief(got))
			}
			for range 3 {
				pass(t, w)
			}
			if got := e.alloc(t, a.ID); got.State != store.AllocationCreateUnknown {
				t.Fatalf("unknown creation moved without evidence: %s", got.State)
			}
			if c := count(n.srv, dockertest.CallContainerCreate); c != 1 {
				t.Fatalf("container.create %d times: Create replayed", c)
			}
			inspects := count(n.srv, dockertest.CallContainerInspect)

			tc.appear(n, a.Reference())
			pass(t, w)
			got := e.alloc(t, a.ID)
			if got.State != store.AllocationRunning || !got.CreateSettled || got.ProviderID == "" {
				t.Fatalf("after observation: %+v", got)
			}
			if c := count(n.srv, dockertest.CallContainerCreate); c != 1 {
				t.Fatalf("container.create %d times after settlement", c)
			}
			if count(n.srv, dockertest.CallContainerInspect) <= inspects {
				t.Fatal("settled without an observation")
			}
		})
	}
}

func TestDeletionKillsAndReleasesOnlyAfterConfirmedCleanupAndSettlement(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	ctx := context.Background()
	w := lifecycle.NewWorker(e.cfg, n.id)

	// A running allocation: deletion kills its container and two volumes,
	// then releases it.
	ab := e.createBundle(t, n.id)
	a := ab.Allocation
	pass(t, w)
	if len(n.srv.Containers()) != 1 || len(n.srv.Volumes()) != 2 {
		t.Fatalf("resources %d containers, %d volumes", len(n.srv.Containers()), len(n.srv.Volumes()))
	}
	_, err := e.svc.Delete(ctx, projects.All(), ab.Session.ID)
	must(t, err)
	pass(t, w)
	got := e.alloc(t, a.ID)
	if got.State != store.AllocationReleased {
		t.Fatalf("after deletion: %+v", got)
	}
	if len(n.srv.Containers()) != 0 || len(n.srv.Volumes()) != 0 {
		t.Fatal("resources left after release")
	}
	if c := count(n.srv, dockertest.CallContainerRemove); c != 1 {
		t.Fatalf("container.remove %d times", c)
	}
	if c := count(n.srv, dockertest.CallVolumeRemove); c != 2 {
		t.Fatalf("volume.remove %d times", c)
	}
	pl, err := e.st.GetPlacement(ctx, a.EnvironmentID)
	must(t, err)
	if pl.State != store.PlacementReleased {
		t.Fatalf("placement %s", pl.State)
	}

}

// TestLostCreateSettlesByTombstoneReceiptAfterDeletion is issue 12's
// unknown creation that never settled: Create's answer is lost and its
// container never appeared. While the Session lives it stays unknown
// (observation only, Create never replayed). Once the Session is deleted,
// Kill removes the partial volumes and claims the Reference's names with a
// tombstone, GetInfo returns the absence receipt, and the allocation is
// released with its creation settled by that receipt: only the tombstone is
// left, and the node's one max_active slot serves the next Session.
func TestLostCreateSettlesByTombstoneReceiptAfterDeletion(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	ctx := context.Background()
	e.commitMaxActive(t, 1)
	w := lifecycle.NewWorker(e.cfg, n.id)

	b := e.createBundle(t, n.id)
	a := b.Allocation
	n.srv.Arm(dockertest.CallContainerCreate, dockertest.FaultDrop, nil)
	pass(t, w)
	for range 2 {
		pass(t, w)
	}
	if got := e.alloc(t, a.ID); got.State != store.AllocationCreateUnknown || got.CreationSettled() {
		t.Fatalf("lost create: %s", brief(got))
	}
	if len(n.srv.Containers()) != 0 || len(n.srv.Volumes()) != 2 {
		t.Fatalf("the lost Create left %d containers and %d volumes, want its two volumes", len(n.srv.Containers()), len(n.srv.Volumes()))
	}
	// A live Session's unknown creation is only observed until
	// CreateAbandonAfter (a minute here): nothing kills it to settle it.
	if c := count(n.srv, dockertest.CallContainerRemove) + count(n.srv, dockertest.CallVolumeRemove); c != 0 {
		t.Fatalf("%d removals before deletion", c)
	}
	e.wantHeld(t, n.id, 1, "with the unknown allocation")

	_, err := e.svc.Delete(ctx, projects.All(), b.Session.ID)
	must(t, err)
	pass(t, w)
	got := e.alloc(t, a.ID)
	if got.State != store.AllocationReleased || !got.AbsenceReceipt || got.CreateSettled || got.ProviderID != "" {
		t.Fatalf("after deletion: %s", brief(got))
	}
	cs := n.srv.Containers()
	if len(cs) != 1 || cs[0].Name != n.p.Name(a.Reference()) || cs[0].Labels[docker.LabelTombstone] != "1" ||
		cs[0].Labels[docker.LabelAllocation] != a.ID.String() || cs[0].State != dockertest.StateCreated {
		t.Fatalf("containers %+v, want only the allocation's never-started tombstone", cs)
	}
	for _, v := range n.srv.Volumes() {
		if v.Labels[docker.LabelTombstone] != "1" || v.Labels[docker.LabelAllocation] != a.ID.String() {
			t.Fatalf("volume %+v is not the tombstone's", v)
		}
	}
	if c := count(n.srv, dockertest.CallContainerStart); c != 0 {
		t.Fatalf("container.start %d times", c)
	}
	// One Runtime container create (the lost one) and the tombstone.
	if c := count(n.srv, dockertest.CallContainerCreate); c != 2 {
		t.Fatalf("container.create %d times, want the lost Create and the tombstone", c)
	}
	e.wantHeld(t, n.id, 0, "after the release")
	sess, err := e.st.GetSession(ctx, b.Session.ID)
	must(t, err)
	if sess.Placement.State != store.PlacementReleased {
		t.Fatalf("placement %s", sess.Placement.State)
	}

	// Later passes change nothing.
	calls := len(n.srv.CallNames())
	pass(t, w)
	if len(n.srv.CallNames()) != calls {
		t.Fatalf("a released allocation got calls: %v", n.srv.CallNames()[calls:])
	}

	// The node's one slot is free: the next Session is placed there and
	// runs.
	e.wantNextSessionRuns(t, w, n.id)
}

// TestLostCreateWhoseContainerAppearedSettlesAfterTwoKills: the lost
// Create's container was created but never started (its start never
// came). The first Kill removes it and its volumes; it proves nothing, so
// the next pass kills again, which claims the names, and the receipt
// settles the creation.
func TestLostCreateWhoseContainerAppearedSettlesAfterTwoKills(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	ctx := context.Background()
	w := lifecycle.NewWorker(e.cfg, n.id)
	b := e.createBundle(t, n.id)
	a := b.Allocation
	n.srv.Arm(dockertest.CallContainerStart, dockertest.FaultDrop, nil)
	pass(t, w)
	if got := e.alloc(t, a.ID); got.State != store.AllocationCreateUnknown {
		t.Fatalf("lost start: %s", brief(got))
	}
	_, err := e.svc.Delete(ctx, projects.All(), b.Session.ID)
	must(t, err)
	pass(t, w)
	got := e.alloc(t, a.ID)
	if got.State != store.AllocationCleanupConfirmed || got.CreationSettled() {
		t.Fatalf("after the first Kill: %s", brief(got))
	}
	if len(n.srv.Containers()) != 0 || len(n.srv.Volumes()) != 0 {
		t.Fatal("the first Kill left resources")
	}
	pass(t, w)
	got = e.alloc(t, a.ID)
	if got.State != store.AllocationReleased || !got.AbsenceReceipt {
		t.Fatalf("after the second Kill: %s", brief(got))
	}
	if cs := n.srv.Containers(); len(cs) != 1 || cs[0].Labels[docker.LabelTombstone] != "1" {
		t.Fatalf("containers %+v, want only the tombstone", cs)
	}
	if c := count(n.srv, dockertest.CallContainerStart); c != 1 {
		t.Fatalf("container.start %d times, want only the lost one", c)
	}
}

// TestLostCreateOfALiveSessionIsAbandonedAndReplaced: a live Session whose
// Create was lost (its container created, its start never came) does not
// wait for ever. Until CreateAbandonAfter has passed since the dispatch
// the creation is only observed; then the worker abandons it: the first
// Kill removes the container and volumes, the next claims the names with a
// tombstone whose receipt settles the attempt, the allocation is released
// with the Session's reservation kept, and the pending scan gives the
// Environment a new allocation that runs. The lost attempt is never
// replayed.
func TestLostCreateOfALiveSessionIsAbandonedAndReplaced(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	ctx := context.Background()
	e.commitMaxActive(t, 1)
	cfg := e.cfg
	cfg.CreateAbandonAfter = time.Second
	w := lifecycle.NewWorker(cfg, n.id)
	b := e.createBundle(t, n.id)
	a := b.Allocation
	n.srv.Arm(dockertest.CallContainerStart, dockertest.FaultDrop, nil)
	pass(t, w)
	pass(t, w)
	if got := e.alloc(t, a.ID); got.State != store.AllocationCreateUnknown {
		t.Fatalf("lost start: %s", brief(got))
	}
	if c := count(n.srv, dockertest.CallContainerRemove); c != 0 {
		t.Fatalf("%d removals before the Create was abandoned", c)
	}
	time.Sleep(1100 * time.Millisecond)
	pass(t, w)
	got := e.alloc(t, a.ID)
	if got.CreateAbandonedAt == nil || got.DeviceRevokedAt == nil || got.State != store.AllocationCleanupConfirmed || got.CreationSettled() {
		t.Fatalf("after abandonment and the first Kill: %s", brief(got))
	}
	e.wantHeld(t, n.id, 1, "while the abandoned attempt settles")
	pass(t, w)
	got = e.alloc(t, a.ID)
	if got.State != store.AllocationReleased || !got.AbsenceReceipt {
		t.Fatalf("after the second Kill: %s", brief(got))
	}
	pass(t, w)
	sess, err := e.st.GetSession(ctx, b.Session.ID)
	must(t, err)
	next := sess.Allocation
	if next.ID == a.ID || next.State != store.AllocationRunning || !next.CreateSettled ||
		sess.Environment.State == store.EnvironmentFailed {
		t.Fatalf("the Session's next allocation: %s (environment %s)", brief(next), sess.Environment.State)
	}
	e.wantHeld(t, n.id, 1, "with the new allocation")
	// The lost attempt's start and the new allocation's: never a replay.
	if c := count(n.srv, dockertest.CallContainerStart); c != 2 {
		t.Fatalf("container.start %d times, want the lost one and the new allocation's", c)
	}
	var runtimes, tombstones int
	for _, c := range n.srv.Containers() {
		switch {
		case c.Labels[docker.LabelTombstone] == "1" && c.Labels[docker.LabelAllocation] == a.ID.String():
			tombstones++
		case c.Labels[docker.LabelAllocation] == next.ID.String() && c.State == dockertest.StateRunning:
			runtimes++
		default:
			t.Errorf("unexpected container %+v", c)
		}
	}
	if runtimes != 1 || tombstones != 1 {
		t.Fatalf("%d running Runtime containers and %d tombstones, want one of each", runtimes, tombstones)
	}
}

func TestHungNodeDoesNotDelayAnotherNode(t *testing.T) {
	e := newEnv(t, 2)
	var healthy, hung *node
	for _, n := range e.nodes {
		if healthy == nil {
			healthy = n
		} else {
			hung = n
		}
	}
	// The hung node's engine performs container.create and then never
	// answers: the call holds until its deadline.
	hung.srv.Arm(dockertest.CallContainerCreate, dockertest.FaultCancelAfterDispatch, func() {})
	e.cfg.CallTimeout = 10 * time.Minute
	e.cfg.DrainTimeout = 100 * time.Millisecond
	stuck := e.createSession(t, hung.id)
	ok := e.createSession(t, healthy.id)

	c := lifecycle.NewCoordinator(e.cfg)
	defer func() { _ = c.Close() }()
	c.Ensure(context.Background(), hung.id, healthy.id)

	// Wait until the hung node's Create is in flight: claimed and dispatched.
	waitFor(t, "the hung node's Create to be dispatched", func() bool {
		return e.alloc(t, stuck.ID).State == store.AllocationCreateDispatched && count(hung.srv, dockertest.CallContainerCreate) == 1
	})
	// Meanwhile the healthy node completes its Create.
	waitFor(t, "the healthy node's allocation to run", func() bool {
		return e.alloc(t, ok.ID).State == store.AllocationRunning
	})
	// ... while the hung node is still stuck in the same call.
	if got := e.alloc(t, stuck.ID); got.State != store.AllocationCreateDispatched {
		t.Fatalf("hung node's allocation %s, want still create_dispatched", got.State)
	}
	if n := len(hung.srv.Containers()); n != 1 {
		t.Fatalf("hung node has %d containers", n)
	}

	// Closing drains, and past the bound cancels the hung call: an owner
	// failure; its outcome is recorded as unknown.
	if err := c.Close(); !errors.Is(err, lifecycle.ErrDrainTimeout) {
		t.Fatalf("close with a hung call: %v, want ErrDrainTimeout", err)
	}
	if got := e.alloc(t, stuck.ID); got.State != store.AllocationCreateUnknown {
		t.Fatalf("after close: %s, want create_unknown", got.State)
	}
	if n := count(hung.srv, dockertest.CallContainerCreate); n != 1 {
		t.Fatalf("hung node container.create %d times", n)
	}
}

// TestSyncKeepsListedWorkersAndStopsOthers: a node that stays listed
// (retired or offline, as the daemon lists them) keeps its worker; a node
// that leaves the list (removed) loses it.
func TestSyncKeepsListedWorkersAndStopsOthers(t *testing.T) {
	e := newEnv(t, 2)
	var ids []uuid.UUID
	for id := range e.nodes {
		ids = append(ids, id)
	}
	c := lifecycle.NewCoordinator(e.cfg)
	defer func() { _ = c.Close() }()
	c.Sync(context.Background(), ids...)
	if got := c.Nodes(); len(got) != 2 {
		t.Fatalf("workers %v, want both nodes", got)
	}
	c.Sync(context.Background(), ids...)
	if got := c.Nodes(); len(got) != 2 {
		t.Fatalf("a second Sync changed the workers: %v", got)
	}
	c.Sync(context.Background(), ids[0])
	if got := c.Nodes(); len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("workers %v, want only %s", got, ids[0])
	}
	// The kept worker still works: a Session on its node runs.
	b := e.createSession(t, ids[0])
	waitFor(t, "the kept node's allocation to run", func() bool {
		return e.alloc(t, b.ID).State == store.AllocationRunning
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDeletionBeforeCreateNeverCreates(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	b := e.createBundle(t, n.id)
	_, err := e.svc.Delete(context.Background(), projects.All(), b.Session.ID)
	must(t, err)
	w := lifecycle.NewWorker(e.cfg, n.id)
	pass(t, w)
	if got := e.alloc(t, b.Allocation.ID); got.State != store.AllocationReleased {
		t.Fatalf("allocation %s, want released", got.State)
	}
	if c := count(n.srv, dockertest.CallContainerCreate) + count(n.srv, dockertest.CallVolumeCreate); c != 0 {
		t.Fatalf("%d creating calls after deletion", c)
	}
}

// TestWorkerPagesAndWrapsOverMoreThanOnePage: 40 allocations on one node
// take two passes of 32-row pages to create, each exactly once, and two
// more to clean up; the cursor wraps instead of stopping at the first page.
func TestWorkerPagesAndWrapsOverMoreThanOnePage(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	ctx := context.Background()
	_, err := e.st.CommitGeneration(ctx, storetest.Seen(t, e.st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{Resources: resources, MaxActive: 64, MaxRetained: 8},
	})
	must(t, err)
	var bundles []store.SessionBundle
	for range 40 {
		bundles = append(bundles, e.createBundle(t, n.id))
	}
	w := lifecycle.NewWorker(e.cfg, n.id)
	running := func() int {
		c := 0
		for _, b := range bundles {
			if e.alloc(t, b.Allocation.ID).State == store.AllocationRunning {
				c++
			}
		}
		return c
	}
	pass(t, w)
	if got := running(); got != 32 {
		t.Fatalf("after one pass %d running, want one page of 32", got)
	}
	pass(t, w)
	if got := running(); got != 40 {
		t.Fatalf("after two passes %d running, want 40", got)
	}
	pass(t, w)
	if got := count(n.srv, dockertest.CallContainerCreate); got != 40 {
		t.Fatalf("container create sent %d times for 40 allocations", got)
	}
	for _, b := range bundles {
		_, err := e.svc.Delete(ctx, projects.All(), b.Session.ID)
		must(t, err)
	}
	for i := 0; i < 6; i++ {
		pass(t, w)
	}
	for _, b := range bundles {
		if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationReleased {
			t.Fatalf("allocation %s is %s after cleanup passes", a.ID, a.State)
		}
	}
	if c, v := len(n.srv.Containers()), len(n.srv.Volumes()); c+v != 0 {
		t.Fatalf("left %d containers and %d volumes", c, v)
	}
}

// settledFailure is a node's real Docker adapter whose first fails Creates
// end with the provider's explicit absence receipt (Create settled and
// left no resource) without reaching the engine; later Creates go to the
// adapter. It records every Create request.
type settledFailure struct {
	*docker.Provider
	fails int

	mu      sync.Mutex
	creates []sandbox.CreateRequest
}

func (s *settledFailure) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	s.mu.Lock()
	s.creates = append(s.creates, req)
	fail := len(s.creates) <= s.fails
	s.mu.Unlock()
	if fail {
		return sandbox.Info{Reference: req.Reference, State: sandbox.StateAbsent, CreateSettled: true},
			fmt.Errorf("create: %w", errdefs.ErrInvalid)
	}
	return s.Provider.Create(ctx, req)
}

func (s *settledFailure) requests() []sandbox.CreateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.creates)
}

// TestSettledCreateFailureGetsANewAllocation: a Create settled by an
// absence receipt is create_failed; the worker cleans it up and releases
// it, and the pending scan gives the still-pending Environment a new
// allocation on the same node, with a new Reference, device credential and
// receipt, whose one Create succeeds. The failed allocation's Create is
// never sent again.
func TestSettledCreateFailureGetsANewAllocation(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	p := &settledFailure{Provider: n.p, fails: 1}
	e.cfg.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return p, nil }
	b := e.createBundle(t, n.id)
	w := lifecycle.NewWorker(e.cfg, n.id)

	// Pass 1: Create fails settled; the allocation is cleaned up and
	// released in the same pass, the Environment keeps its reservation.
	pass(t, w)
	first := e.alloc(t, b.Allocation.ID)
	if first.State != store.AllocationReleased || !first.AbsenceReceipt {
		t.Fatalf("failed allocation after one pass: %+v", first)
	}
	got, err := e.st.GetSession(context.Background(), b.Session.ID)
	must(t, err)
	if got.Environment.State != store.EnvironmentPending || got.Placement.State != store.PlacementReserved || got.Allocation.ID != uuid.Nil {
		t.Fatalf("after the failure: %+v", got)
	}
	// Pass 2: a new allocation, created once.
	pass(t, w)
	pass(t, w)
	got, err = e.st.GetSession(context.Background(), b.Session.ID)
	must(t, err)
	second := got.Allocation
	if second.ID == uuid.Nil || second.ID == first.ID || second.State != store.AllocationRunning || !second.CreateSettled ||
		second.NodeID != n.id || second.DeviceID == first.DeviceID || second.CreateReceipt == first.CreateReceipt ||
		bytes.Equal(second.CredentialDigest, first.CredentialDigest) {
		t.Fatalf("second allocation %+v after %+v", second, first)
	}
	reqs := p.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d Creates, want 2 (one per allocation)", len(reqs))
	}
	if reqs[0].Reference != first.Reference() || reqs[1].Reference != second.Reference() {
		t.Fatalf("Create references %v, %v; want %v then %v", reqs[0].Reference, reqs[1].Reference, first.Reference(), second.Reference())
	}
	if !bytes.Equal(sessions.Digest(reqs[1].Bootstrap.Credential.Reveal()), second.CredentialDigest) ||
		bytes.Equal(sessions.Digest(reqs[0].Bootstrap.Credential.Reveal()), sessions.Digest(reqs[1].Bootstrap.Credential.Reveal())) ||
		reqs[1].Bootstrap.DeviceID != second.DeviceID.String() {
		t.Fatal("the new allocation does not carry its own new credential and device")
	}
	// The fake failure made nothing on the engine and settled its
	// creation, so its cleanup's Kill said so and claimed no names (no
	// tombstone: issue 26, item 11); the one container created is the
	// second allocation's Runtime.
	if c := count(n.srv, dockertest.CallContainerCreate); c != 1 || runtimeContainers(n) != 1 {
		t.Fatalf("container.create %d times, %d Runtime containers; want only the second allocation's Runtime container (no tombstone for a settled creation)", c, runtimeContainers(n))
	}
	// Later passes send nothing more.
	pass(t, w)
	if len(p.requests()) != 2 {
		t.Fatal("a Create was sent again")
	}
}

// TestRepeatedSettledCreateFailuresFailTheEnvironment: after
// store.MaxCreateAttempts settled Create failures the Environment is
// recorded failed (create_failed), its reservation is released and no
// further allocation or Create follows.
func TestRepeatedSettledCreateFailuresFailTheEnvironment(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	p := &settledFailure{Provider: n.p, fails: 1 << 30}
	e.cfg.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return p, nil }
	b := e.createBundle(t, n.id)
	w := lifecycle.NewWorker(e.cfg, n.id)
	for range 2 * store.MaxCreateAttempts {
		pass(t, w)
	}
	if c := len(p.requests()); c != store.MaxCreateAttempts {
		t.Fatalf("%d Creates, want %d", c, store.MaxCreateAttempts)
	}
	got, err := e.st.GetSession(context.Background(), b.Session.ID)
	must(t, err)
	if got.Environment.State != store.EnvironmentFailed || got.Environment.FailureCode != store.FailureCreateFailed ||
		got.Placement.State != store.PlacementReleased || got.Allocation.ID != uuid.Nil {
		t.Fatalf("after %d failures: %+v", store.MaxCreateAttempts, got)
	}
	// The last failure was the Environment's terminal cleanup: its cause is
	// recorded and the last allocation's device was revoked before Kill.
	if got.Environment.TerminalCause != store.TerminalFailed || got.Environment.TerminatedAt == nil {
		t.Fatalf("terminal cause %q", got.Environment.TerminalCause)
	}
	last := uuid.MustParse(p.requests()[len(p.requests())-1].Reference.AllocationID)
	if a := e.alloc(t, last); a.DeviceRevokedAt == nil {
		t.Fatal("the last allocation's device is not revoked")
	}
	seen := map[uuid.UUID]bool{}
	for _, r := range p.requests() {
		id := uuid.MustParse(r.Reference.AllocationID)
		if seen[id] {
			t.Fatalf("Create replayed for allocation %s", id)
		}
		seen[id] = true
		if a := e.alloc(t, id); a.State != store.AllocationReleased || !a.AbsenceReceipt {
			t.Fatalf("failed allocation %+v", a)
		}
	}
	holds, err := e.st.NodeHolds(context.Background(), n.id)
	must(t, err)
	if holds {
		t.Fatal("node holds after the Environment failed")
	}
}

// TestSupersededWorkerSendsNoCreate: once another owner epoch holds the
// execution lease, a worker of the old Core (which has not noticed) is
// refused its claim, sends no Create and the pass ends with
// store.ErrSuperseded; the new owner's worker creates.
func TestSupersededWorkerSendsNoCreate(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	ctx := context.Background()
	b := e.createBundle(t, n.id)
	if _, err := e.st.Pool().Exec(ctx, "UPDATE execution_lease SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	epoch, err := e.st.NextOwnerEpoch(ctx)
	must(t, err)
	ok, err := e.st.AcquireLease(ctx, uuid.New(), epoch, time.Hour)
	if err != nil || !ok {
		t.Fatalf("takeover: %v %v", ok, err)
	}
	err = lifecycle.NewWorker(e.cfg, n.id).Pass(ctx)
	if !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("pass of the superseded worker: %v, want ErrSuperseded", err)
	}
	if c := count(n.srv, dockertest.CallContainerCreate); c != 0 {
		t.Fatalf("superseded worker sent container.create %d times", c)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationAllocated || a.Revision != b.Allocation.Revision {
		t.Fatalf("allocation changed under a superseded owner: %+v", a)
	}
	cfg := e.cfg
	cfg.Store = storetest.As(e.st.Store, epoch)
	pass(t, lifecycle.NewWorker(cfg, n.id))
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationRunning {
		t.Fatalf("the new owner's worker: %+v", a)
	}
	if c := count(n.srv, dockertest.CallContainerCreate); c != 1 {
		t.Fatalf("container.create %d times, want 1", c)
	}
}

// commitMaxActive commits a new generation whose nodes each hold at most
// maxActive Sessions.
func (e *env) commitMaxActive(t *testing.T, maxActive int32) {
	t.Helper()
	ctx := context.Background()
	_, err := e.st.CommitGeneration(ctx, storetest.Seen(t, e.st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{Resources: resources, MaxActive: maxActive, MaxRetained: 8},
	})
	must(t, err)
}

// deletingCreate is a node's real Docker adapter whose Create runs hook
// before it returns, and then returns the adapter's Info; with fail it
// reports the call failed, keeping the Info, as a provider may when a step
// after the settling one fails (the guide: "a failed call may return both
// Info and an error"). The Docker adapter itself returns settlement
// evidence with an error only for a container the engine did not create as
// configured (see TestUnfitContainerIsNotSuccess), which is neither an
// absence receipt nor a running resource with completed bootstrap.
type deletingCreate struct {
	*docker.Provider
	hook func(ref sandbox.Reference)
	fail bool
	// absent skips the engine and answers with an explicit absence receipt.
	absent bool
}

func (d *deletingCreate) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	var info sandbox.Info
	var err error
	if d.absent {
		info = sandbox.Info{Reference: req.Reference, State: sandbox.StateAbsent, CreateSettled: true}
		err = fmt.Errorf("create: %w", errdefs.ErrInvalid)
	} else {
		info, err = d.Provider.Create(ctx, req)
	}
	if d.hook != nil {
		d.hook(req.Reference)
	}
	if d.fail && err == nil {
		err = fmt.Errorf("create: after start: %w", errdefs.ErrComputeUnconfirmed)
	}
	return info, err
}

// TestDeletionRacingCreateIsReleased is issue 12's bug: the Session is
// deleted (cleanup requested, the allocation's revision moves) between
// ClaimCreate and the record of Create's outcome. The outcome still settles
// creation, cleanup removes the container and volumes, the allocation is
// released and its node's only max_active slot serves the next Session.
func TestDeletionRacingCreateIsReleased(t *testing.T) {
	for _, tc := range []struct {
		name string
		// arm makes del run during Create; wrap, when set, replaces the
		// node's provider.
		arm  func(n *node, del func())
		wrap func(n *node, del func()) sandbox.SandboxProvider
		// absent: the Create settled without a resource.
		absent bool
	}{
		{name: "deleted while the engine creates the container", arm: func(n *node, del func()) {
			n.srv.Arm(dockertest.CallContainerCreate, dockertest.FaultHookAfterDispatch, del)
		}},
		{name: "deleted while the engine starts the Runtime", arm: func(n *node, del func()) {
			n.srv.Arm(dockertest.CallContainerStart, dockertest.FaultHookAfterDispatch, del)
		}},
		{name: "deleted during a failed Create that left a settled running resource", wrap: func(n *node, del func()) sandbox.SandboxProvider {
			return &deletingCreate{Provider: n.p, hook: func(sandbox.Reference) { del() }, fail: true}
		}},
		{name: "deleted during a Create that settled absent", absent: true, wrap: func(n *node, del func()) sandbox.SandboxProvider {
			return &deletingCreate{Provider: n.p, hook: func(sandbox.Reference) { del() }, absent: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			n := e.only(t)
			ctx := context.Background()
			e.commitMaxActive(t, 1)
			b := e.createBundle(t, n.id)
			del := func() {
				got, err := e.svc.Delete(ctx, projects.All(), b.Session.ID)
				if err != nil || got.Allocation.State != store.AllocationCleanupRequested {
					t.Errorf("delete during Create: %+v %v", got.Allocation, err)
				}
			}
			if tc.arm != nil {
				tc.arm(n, del)
			}
			if tc.wrap != nil {
				p := tc.wrap(n, del)
				e.cfg.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return p, nil }
			}
			w := lifecycle.NewWorker(e.cfg, n.id)
			pass(t, w)

			got := e.alloc(t, b.Allocation.ID)
			if got.State != store.AllocationReleased || !got.CreationSettled() || got.AbsenceReceipt != tc.absent ||
				got.CreateSettled == tc.absent || (got.ProviderID == "") != tc.absent {
				t.Fatalf("after the pass: %s", brief(got))
			}
			// Only a tombstone may be left: the fake absent Create made
			// nothing, so Kill found no container and claimed the names.
			if c, v := runtimeContainers(n), runtimeVolumes(n); c+v != 0 {
				t.Fatalf("left %d containers and %d volumes", c, v)
			}
			if tombs := len(n.srv.Containers()) - runtimeContainers(n); tombs != 0 && !tc.absent {
				t.Fatalf("%d tombstones after a Create that made a container", tombs)
			}
			sess, err := e.st.GetSession(ctx, b.Session.ID)
			must(t, err)
			if sess.Session.State != store.SessionDeleteRequested || sess.Placement.State != store.PlacementReleased {
				t.Fatalf("session after cleanup: %+v", sess)
			}
			e.wantHeld(t, n.id, 0, "after the release")
			if c := count(n.srv, dockertest.CallContainerCreate); c > 1 {
				t.Fatalf("container.create %d times", c)
			}

			// The node's one slot is free: the next Session is placed there
			// and runs.
			e.cfg.Provider = func(id uuid.UUID) (sandbox.SandboxProvider, error) { return e.nodes[id].p, nil }
			e.wantNextSessionRuns(t, lifecycle.NewWorker(e.cfg, n.id), n.id)
		})
	}
}

// TestFailedCreateKeepsSettledRunningEvidence: a Create that fails but
// returns a matching running resource with completed bootstrap settles as
// running from that evidence, without waiting for another observation
// (here the engine cannot answer one), and is never sent again.
func TestFailedCreateKeepsSettledRunningEvidence(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	p := &deletingCreate{Provider: n.p, fail: true, hook: func(sandbox.Reference) {
		n.srv.Arm(dockertest.CallContainerInspect, dockertest.FaultServerError, nil)
	}}
	e.cfg.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return p, nil }
	a := e.createSession(t, n.id)
	w := lifecycle.NewWorker(e.cfg, n.id)
	pass(t, w)
	got := e.alloc(t, a.ID)
	cs := n.srv.Containers()
	if len(cs) != 1 || got.State != store.AllocationRunning || !got.CreateSettled || got.ProviderID != cs[0].ID {
		t.Fatalf("after the failed Create: %s", brief(got))
	}
	pl, err := e.st.GetPlacement(context.Background(), a.EnvironmentID)
	must(t, err)
	if pl.State != store.PlacementActive {
		t.Fatalf("placement %s", pl.State)
	}
	pass(t, w)
	if c := count(n.srv, dockertest.CallContainerCreate); c != 1 {
		t.Fatalf("container.create %d times", c)
	}
}

// TestUnfitContainerIsNotSuccess: the Docker adapter's settled failure (the
// engine created the container with another image than the configured
// one) carries a created, never started container. That is no running
// resource with completed bootstrap and no absence receipt, so it settles
// nothing and is never recorded as running; Create is not sent again, and
// deletion still removes the container and both volumes.
func TestUnfitContainerIsNotSuccess(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	ctx := context.Background()
	const tag = "berth/runtime:unfit" // the engine answers with its image id
	n.srv.PutImage(tag)
	cli, err := docker.NewClient(n.srv.Host())
	must(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	unfit := docker.New(cli, docker.Options{
		InstallationID: e.inst.ID.String(),
		Config:         docker.NodeConfig{Image: tag, Network: "none"},
		Seccomp:        []byte(`{"defaultAction":"SCMP_ACT_ERRNO"}`),
		Resources:      resources,
	})
	b := e.createBundle(t, n.id)
	var info sandbox.Info
	var cerr error
	rec := &recordingCreate{SandboxProvider: unfit, info: &info, err: &cerr}
	e.cfg.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return rec, nil }
	w := lifecycle.NewWorker(e.cfg, n.id)
	for range 3 {
		pass(t, w)
	}
	ref := b.Allocation.Reference()
	if cerr == nil || !info.CreateSettled || info.State != sandbox.StateCreated || info.CheckFor(ref) != nil ||
		info.IsSettledRunning(ref) || info.IsAbsenceReceipt(ref) {
		t.Fatalf("the adapter's unfit Create returned %+v, %v", info, cerr)
	}
	got := e.alloc(t, b.Allocation.ID)
	if got.State != store.AllocationCreateUnknown || got.CreationSettled() || got.ProviderID != "" || got.BootstrapComplete {
		t.Fatalf("after the unfit Create: %s", brief(got))
	}
	if c := count(n.srv, dockertest.CallContainerCreate); c != 1 {
		t.Fatalf("container.create %d times", c)
	}
	if cs := n.srv.Containers(); len(cs) != 1 || cs[0].State != dockertest.StateCreated {
		t.Fatalf("containers %+v", cs)
	}
	_, err = e.svc.Delete(ctx, projects.All(), b.Session.ID)
	must(t, err)
	pass(t, w)
	if c, v := len(n.srv.Containers()), len(n.srv.Volumes()); c+v != 0 {
		t.Fatalf("left %d containers and %d volumes", c, v)
	}
	if c := count(n.srv, dockertest.CallContainerCreate); c != 1 {
		t.Fatalf("container.create %d times after deletion", c)
	}
}

// recordingCreate keeps what the wrapped provider's last Create returned.
type recordingCreate struct {
	sandbox.SandboxProvider
	info *sandbox.Info
	err  *error
}

func (r *recordingCreate) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	info, err := r.SandboxProvider.Create(ctx, req)
	*r.info, *r.err = info, err
	return info, err
}

// brief is an allocation's lifecycle fields, for failure messages.
// runtimeContainers and runtimeVolumes count the node's containers and
// volumes that are not tombstones.
func runtimeContainers(n *node) int {
	c := 0
	for _, x := range n.srv.Containers() {
		if x.Labels[docker.LabelTombstone] != "1" {
			c++
		}
	}
	return c
}

func runtimeVolumes(n *node) int {
	c := 0
	for _, x := range n.srv.Volumes() {
		if x.Labels[docker.LabelTombstone] != "1" {
			c++
		}
	}
	return c
}

func brief(a store.Allocation) string {
	return fmt.Sprintf("%s settled=%v absence=%v bootstrap=%v provider_id=%q revision=%d",
		a.State, a.CreateSettled, a.AbsenceReceipt, a.BootstrapComplete, a.ProviderID, a.Revision)
}

func TestDisabledProviderSendsNoCreateAndStillCleansUp(t *testing.T) {
	e := newEnv(t, 1)
	n := e.only(t)
	ctx := context.Background()
	w := lifecycle.NewWorker(e.cfg, n.id)

	running := e.createBundle(t, n.id)
	pass(t, w)
	if got := e.alloc(t, running.Allocation.ID); got.State != store.AllocationRunning {
		t.Fatalf("running allocation %s", got.State)
	}
	pending := e.createBundle(t, n.id)
	_, err := e.st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	creates := count(n.srv, dockertest.CallContainerCreate) + count(n.srv, dockertest.CallVolumeCreate)

	// Disabled: the pending allocation waits with its fresh receipt, and a
	// deleted Session's compute is still killed and released.
	_, err = e.svc.Delete(ctx, projects.All(), running.Session.ID)
	must(t, err)
	for range 2 {
		pass(t, w)
	}
	if c := count(n.srv, dockertest.CallContainerCreate) + count(n.srv, dockertest.CallVolumeCreate); c != creates {
		t.Fatalf("%d creating calls while disabled", c-creates)
	}
	if got := e.alloc(t, pending.Allocation.ID); got.State != store.AllocationAllocated || got.CreateDispatchedAt != nil {
		t.Fatalf("pending allocation while disabled: %s", got.State)
	}
	if got := e.alloc(t, running.Allocation.ID); got.State != store.AllocationReleased {
		t.Fatalf("deleted allocation while disabled: %s", got.State)
	}
	if len(n.srv.Containers()) != 0 {
		t.Fatal("the deleted Session's container is left")
	}

	// Enabled again: the waiting allocation gets its one Create.
	_, err = e.st.SetProviderDisabled(ctx, false, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	pass(t, w)
	if got := e.alloc(t, pending.Allocation.ID); got.State != store.AllocationRunning {
		t.Fatalf("pending allocation after enabling: %s", got.State)
	}
	if c := count(n.srv, dockertest.CallContainerCreate); c != 2 {
		t.Fatalf("container.create %d times, want one per allocation", c)
	}
}

// gatedCreate holds every Create until release is closed (or its context
// ends), telling entered when one arrives.
type gatedCreate struct {
	*docker.Provider
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedCreate) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.release:
	case <-ctx.Done():
		return sandbox.Info{}, ctx.Err()
	}
	return g.Provider.Create(ctx, req)
}

// gatedWorker starts a Coordinator over one node whose first Create waits
// for g.release, with drain as its DrainTimeout and sessions Sessions
// placed on the node; it returns once that Create is in flight.
func gatedWorker(t *testing.T, drain time.Duration, sessions int) (*env, *node, *gatedCreate, *lifecycle.Coordinator, []store.Allocation) {
	t.Helper()
	e := newEnv(t, 1)
	n := e.only(t)
	g := &gatedCreate{Provider: n.p, entered: make(chan struct{}), release: make(chan struct{})}
	e.cfg.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return g, nil }
	e.cfg.DrainTimeout = drain
	allocs := make([]store.Allocation, sessions)
	for i := range allocs {
		allocs[i] = e.createSession(t, n.id)
	}
	c := lifecycle.NewCoordinator(e.cfg)
	t.Cleanup(func() { _ = c.Close() })
	c.Ensure(context.Background(), n.id)
	<-g.entered
	return e, n, g, c, allocs
}

// TestStopDrainsBetweenOperations: stopping a node's worker never cancels
// the operation in flight: the Create claimed before the stop completes
// and is recorded running, the next pending allocation gets no Create,
// and Stop returns once the worker has stopped between the two.
func TestStopDrainsBetweenOperations(t *testing.T) {
	e, n, g, c, allocs := gatedWorker(t, time.Minute, 2)
	first, second := allocs[0], allocs[1]
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(n.id) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a claimed Create was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(g.release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	var inFlight, next store.Allocation
	for _, a := range []store.Allocation{e.alloc(t, first.ID), e.alloc(t, second.ID)} {
		if a.State == store.AllocationRunning {
			inFlight = a
		} else {
			next = a
		}
	}
	if inFlight.ID == uuid.Nil || next.State != store.AllocationAllocated || count(n.srv, dockertest.CallContainerCreate) != 1 {
		t.Fatalf("after the drain: %s and %s, %d creates; want one running, one allocated, 1 create",
			e.alloc(t, first.ID).State, e.alloc(t, second.ID).State, count(n.srv, dockertest.CallContainerCreate))
	}
}

// inFlight returns the one allocation of allocs whose Create is
// dispatched (a gatedWorker's Create in flight) and the others.
func (e *env) inFlight(t *testing.T, allocs []store.Allocation) (store.Allocation, []store.Allocation) {
	t.Helper()
	var found []store.Allocation
	var rest []store.Allocation
	for _, a := range allocs {
		if got := e.alloc(t, a.ID); got.State == store.AllocationCreateDispatched {
			found = append(found, got)
		} else {
			rest = append(rest, got)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d Creates in flight, want 1", len(found))
	}
	return found[0], rest
}

// wantAdmissionClosed fails the test unless a new Session is refused
// with the owner failure's fixed reason (owner_failure).
func (e *env) wantAdmissionClosed(t *testing.T, after string) {
	t.Helper()
	_, err := e.svc.Create(context.Background(), projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "s"})
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "owner_failure" || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("CreateSession %s: %v, want refused with owner_failure (admission closed)", after, err)
	}
	if e.failures.count() == 0 {
		t.Fatalf("admission closed %s, but no owner failure was recorded", after)
	}
}

// wantNoNewWorker fails the test unless node keeps its lifecycle identity
// and gets no new worker: next (allocated on node) stays uncreated while
// Ensure and Wake are asked again and again (many worker intervals).
func (e *env) wantNoNewWorker(t *testing.T, c *lifecycle.Coordinator, node uuid.UUID, next store.Allocation) {
	t.Helper()
	if !slices.Contains(c.Nodes(), node) {
		t.Fatal("the node lost its lifecycle identity")
	}
	for range 10 {
		c.Ensure(context.Background(), node)
		c.Wake(node)
		time.Sleep(5 * e.cfg.Interval)
	}
	if got := e.alloc(t, next.ID).State; got != store.AllocationAllocated {
		t.Fatalf("the node's next allocation is %s, want allocated (no new worker)", got)
	}
}

// TestStopPastTheBoundCancelsNothing: a Stop (a removed node's worker, as
// Sync stops it) whose worker is still in its operation at the bound
// cancels nothing: Stop returns ErrUndrained with the Create still in
// flight, which completes and is recorded running once the engine
// answers; Core's admission is closed (CreateSession refused with
// owner_failure: the owner failure); the node keeps that worker's
// identity (no new worker starts, whatever Ensure asks) and a later Stop
// fails the same way at once.
func TestStopPastTheBoundCancelsNothing(t *testing.T) {
	e, n, g, c, allocs := gatedWorker(t, 200*time.Millisecond, 2)
	inFlight, rest := e.inFlight(t, allocs)
	err := c.Stop(n.id)
	if got := e.alloc(t, inFlight.ID).State; got != store.AllocationCreateDispatched {
		t.Fatalf("after a Stop past the bound (%v) the Create in flight is %s, want still dispatched (not cancelled)", err, got)
	}
	if !errors.Is(err, lifecycle.ErrUndrained) {
		t.Fatalf("Stop past the bound: %v, want ErrUndrained", err)
	}
	e.wantAdmissionClosed(t, "after a Stop past the bound")
	close(g.release)
	waitFor(t, "the Create in flight to complete (not cancelled)", func() bool {
		return e.alloc(t, inFlight.ID).State == store.AllocationRunning
	})
	e.wantNoNewWorker(t, c, n.id, rest[0])
	if err := c.Stop(n.id); !errors.Is(err, lifecycle.ErrUndrained) {
		t.Fatalf("a later Stop: %v, want ErrUndrained at once", err)
	}
	if got := count(n.srv, dockertest.CallContainerCreate); got != 1 {
		t.Fatalf("%d container creates, want 1", got)
	}
}

// replacer is a DeploymentService over e's database, with docker and a
// direct test provider registered, whose retirements run through c's
// drain gate exactly as Core wires them (core/daemon).
func (e *env) replacer(t *testing.T, c *lifecycle.Coordinator) *deployment.Service {
	t.Helper()
	reg, err := providers.NewRegistry(docker.Registration(), deploymenttest.DirectRegistration())
	must(t, err)
	svc, err := deployment.NewService(e.st, reg, e.cfg.Key, e.inst.ID, deployment.Options{Gate: c.Gate(deployment.ErrReplaceUndrained)})
	must(t, err)
	return svc
}

// nodeState reads node id's state.
func (e *env) nodeState(t *testing.T, id uuid.UUID) store.NodeState {
	t.Helper()
	n, err := e.st.GetNode(context.Background(), id)
	must(t, err)
	return n.State
}

// TestReplacementWithAnotherKindDrainsTheNodesWorker: a replacement with
// another provider kind retires the enabled nodes only after their
// lifecycle workers drained. While the node's worker is inside a Create,
// ReplaceDeployment waits: nothing is committed and the node stays
// enabled. Once the engine answers, the Create completes (not cancelled)
// and is recorded running before the replacement commits; the node is
// retired with the commit, and a new worker goes on with what was placed
// on it before.
func TestReplacementWithAnotherKindDrainsTheNodesWorker(t *testing.T) {
	e, n, g, c, allocs := gatedWorker(t, time.Minute, 2)
	inFlight, rest := e.inFlight(t, allocs)
	svc := e.replacer(t, c)
	ctx := context.Background()

	type result struct {
		r   deployment.Replacement
		err error
	}
	replaced := make(chan result, 1)
	go func() {
		r, err := svc.Replace(ctx, deploymenttest.DirectCandidate("eu", "tok"), nil, 1, store.NewAdminProvenance(uuid.New()))
		replaced <- result{r, err}
	}()
	select {
	case res := <-replaced:
		t.Fatalf("Replace returned (%v, retired %v) while the node's Create was in flight", res.err, res.r.RetiredNodes)
	case <-time.After(300 * time.Millisecond):
	}
	if got := e.nodeState(t, n.id); got != store.NodeEnabled {
		t.Fatalf("while the Create is in flight the node is %s, want enabled", got)
	}
	if cur, err := e.st.CurrentGeneration(ctx); err != nil || cur.Generation != 1 {
		t.Fatalf("while the Create is in flight the current generation is %d (%v), want 1", cur.Generation, err)
	}
	close(g.release)
	res := <-replaced
	must(t, res.err)
	// When Replace answered, the Create had completed and been recorded.
	if got := e.alloc(t, inFlight.ID).State; got != store.AllocationRunning {
		t.Fatalf("when Replace answered the Create in flight was %s, want running (drained before the commit)", got)
	}
	if !res.r.Changed || len(res.r.RetiredNodes) != 1 || res.r.RetiredNodes[0] != n.id || e.nodeState(t, n.id) != store.NodeRetired {
		t.Fatalf("replacement %+v, node %s; want the node retired", res.r, e.nodeState(t, n.id))
	}
	waitFor(t, "the new worker to create the node's other allocation", func() bool {
		return e.alloc(t, rest[0].ID).State == store.AllocationRunning
	})
	if got := count(n.srv, dockertest.CallContainerCreate); got != 2 {
		t.Fatalf("%d container creates, want 2", got)
	}
}

// TestReplacementPastTheDrainBoundClosesAdmission: a replacement with
// another provider kind whose node's worker is still inside a Create
// when the drain's five-second bound (the default, as in Core) passes
// cancels nothing: ReplaceDeployment is refused with owner_failure and
// commits nothing (generation 1 stays current, the node stays enabled),
// Core's admission is closed (CreateSession refused with owner_failure),
// the Create completes and is recorded running once the engine answers,
// the node keeps that worker (no new one), and a retry of the
// replacement is refused at once: the drain barrier stays closed.
func TestReplacementPastTheDrainBoundClosesAdmission(t *testing.T) {
	e, n, g, c, allocs := gatedWorker(t, 0, 2)
	inFlight, rest := e.inFlight(t, allocs)
	svc := e.replacer(t, c)
	ctx := context.Background()

	_, err := svc.Replace(ctx, deploymenttest.DirectCandidate("eu", "tok"), nil, 1, store.NewAdminProvenance(uuid.New()))
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "owner_failure" || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Replace with the node's Create in flight past the bound: %v, want refused with owner_failure", err)
	}
	if got := e.alloc(t, inFlight.ID).State; got != store.AllocationCreateDispatched {
		t.Fatalf("after the refused replacement the Create in flight is %s, want still dispatched (not cancelled)", got)
	}
	if cur, err := e.st.CurrentGeneration(ctx); err != nil || cur.Generation != 1 {
		t.Fatalf("after the refused replacement the current generation is %d (%v), want 1", cur.Generation, err)
	}
	if got := e.nodeState(t, n.id); got != store.NodeEnabled {
		t.Fatalf("after the refused replacement the node is %s, want enabled", got)
	}
	e.wantAdmissionClosed(t, "after the refused replacement")
	close(g.release)
	waitFor(t, "the Create in flight to complete (not cancelled)", func() bool {
		return e.alloc(t, inFlight.ID).State == store.AllocationRunning
	})
	e.wantNoNewWorker(t, c, n.id, rest[0])
	_, err = svc.Replace(ctx, deploymenttest.DirectCandidate("eu", "tok"), nil, 1, store.NewAdminProvenance(uuid.New()))
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "owner_failure" {
		t.Fatalf("a retried replacement: %v, want refused with owner_failure (the barrier stays closed)", err)
	}
	if cur, err := e.st.CurrentGeneration(ctx); err != nil || cur.Generation != 1 || e.nodeState(t, n.id) != store.NodeEnabled {
		t.Fatalf("after the retry: generation %d (%v), node %s; want 1 and enabled", cur.Generation, err, e.nodeState(t, n.id))
	}
}

// TestRestartDrainsBetweenOperations: a Restart (a node's retirement)
// waits for the operation in flight to end, never cancelling it, runs
// its change while no worker of the node runs, then starts a new worker
// that goes on with the node's work.
func TestRestartDrainsBetweenOperations(t *testing.T) {
	e, n, g, c, allocs := gatedWorker(t, time.Minute, 2)
	first, second := allocs[0], allocs[1]

	var changes atomic.Int32
	var during []store.AllocationState
	restarted := make(chan error, 1)
	go func() {
		restarted <- c.Restart(context.Background(), []uuid.UUID{n.id}, func() error {
			changes.Add(1)
			during = []store.AllocationState{e.alloc(t, first.ID).State, e.alloc(t, second.ID).State}
			return nil
		})
	}()
	select {
	case err := <-restarted:
		t.Fatalf("Restart returned (%v) while a claimed Create was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	if changes.Load() != 0 {
		t.Fatal("the change ran while a claimed Create was in flight")
	}
	close(g.release)
	if err := <-restarted; err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if changes.Load() != 1 {
		t.Fatalf("the change ran %d times, want once", changes.Load())
	}
	// The change saw the Create in flight finished and recorded, and the
	// next one not started: no worker ran beside it.
	running, allocated := 0, 0
	for _, s := range during {
		switch s {
		case store.AllocationRunning:
			running++
		case store.AllocationAllocated:
			allocated++
		}
	}
	if running != 1 || allocated != 1 {
		t.Fatalf("during the change the allocations were %v, want one running and one allocated", during)
	}
	// The new worker creates the rest.
	waitFor(t, "the new worker to create the second allocation", func() bool {
		return e.alloc(t, first.ID).State == store.AllocationRunning && e.alloc(t, second.ID).State == store.AllocationRunning
	})
	if got := count(n.srv, dockertest.CallContainerCreate); got != 2 {
		t.Fatalf("%d container creates, want 2", got)
	}
}

// TestFailedRestartKeepsTheWorker: a Restart whose worker is still in its
// operation at the bound cancels nothing (the Create in flight completes
// and is recorded running), does not run its change, closes admission
// (the owner failure) and returns ErrUndrained; the node keeps its
// worker's identity and gets no new one (its next pending allocation
// stays uncreated while Ensure is asked again), and every later Restart
// of the node fails at once.
func TestFailedRestartKeepsTheWorker(t *testing.T) {
	e, n, g, c, allocs := gatedWorker(t, 200*time.Millisecond, 2)
	inFlight, rest := e.inFlight(t, allocs)

	changed := false
	change := func() error { changed = true; return nil }
	if err := c.Restart(context.Background(), []uuid.UUID{n.id}, change); !errors.Is(err, lifecycle.ErrUndrained) {
		t.Fatalf("Restart past the bound: %v, want ErrUndrained", err)
	}
	if changed {
		t.Fatal("a Restart past the bound ran its change")
	}
	e.wantAdmissionClosed(t, "after a Restart past the bound")
	close(g.release)
	waitFor(t, "the Create in flight to complete", func() bool {
		return e.alloc(t, inFlight.ID).State == store.AllocationRunning
	})
	if err := c.Restart(context.Background(), []uuid.UUID{n.id}, change); !errors.Is(err, lifecycle.ErrUndrained) || changed {
		t.Fatalf("a later Restart: %v (change ran: %v), want ErrUndrained at once", err, changed)
	}
	e.wantNoNewWorker(t, c, n.id, rest[0])
}

// TestFailedRestartRenewsTheDrainedWorkers: a Restart of two nodes (a
// replacement's retirement) whose drain passes its bound on one of them
// runs no change; the node whose worker did drain gets a new worker at
// once (a Session deleted there afterwards is cleaned up and released),
// while the late one keeps its worker, whose Create in flight completes.
func TestFailedRestartRenewsTheDrainedWorkers(t *testing.T) {
	e := newEnv(t, 2)
	var hung, healthy *node
	for _, n := range e.nodes {
		if hung == nil {
			hung = n
		} else {
			healthy = n
		}
	}
	g := &gatedCreate{Provider: hung.p, entered: make(chan struct{}), release: make(chan struct{})}
	e.cfg.Provider = func(id uuid.UUID) (sandbox.SandboxProvider, error) {
		if id == hung.id {
			return g, nil
		}
		return e.nodes[id].p, nil
	}
	e.cfg.DrainTimeout = 200 * time.Millisecond
	ok := e.createBundle(t, healthy.id)
	stuck := e.createSession(t, hung.id)
	c := lifecycle.NewCoordinator(e.cfg)
	t.Cleanup(func() { _ = c.Close() })
	c.Ensure(context.Background(), hung.id, healthy.id)
	<-g.entered
	waitFor(t, "the healthy node's allocation to run", func() bool {
		return e.alloc(t, ok.Allocation.ID).State == store.AllocationRunning
	})

	changed := false
	err := c.Restart(context.Background(), []uuid.UUID{hung.id, healthy.id}, func() error { changed = true; return nil })
	if !errors.Is(err, lifecycle.ErrUndrained) || changed {
		t.Fatalf("Restart of both nodes past the bound on one: %v (change ran: %v), want ErrUndrained and no change", err, changed)
	}
	_, err = e.svc.Delete(context.Background(), projects.All(), ok.Session.ID)
	must(t, err)
	waitFor(t, "the healthy node's new worker to release the deleted Session's allocation", func() bool {
		return e.alloc(t, ok.Allocation.ID).State == store.AllocationReleased
	})
	close(g.release)
	waitFor(t, "the late worker's Create to complete", func() bool {
		return e.alloc(t, stuck.ID).State == store.AllocationRunning
	})
}
