package lifecycle_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"berth.dev/core/lifecycle"
	"berth.dev/core/projects"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
)

// counting forwards to the real adapter and counts GetInfo and Renew per
// allocation (the Docker fixture sees both as container.inspect).
type counting struct {
	sandbox.SandboxProvider
	mu            sync.Mutex
	getInfo, renw map[string]int
}

func newCounting(p sandbox.SandboxProvider) *counting {
	return &counting{SandboxProvider: p, getInfo: map[string]int{}, renw: map[string]int{}}
}

func (c *counting) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	c.mu.Lock()
	c.getInfo[ref.AllocationID]++
	c.mu.Unlock()
	return c.SandboxProvider.GetInfo(ctx, ref)
}

func (c *counting) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	c.mu.Lock()
	c.renw[ref.AllocationID]++
	c.mu.Unlock()
	return c.SandboxProvider.Renew(ctx, ref)
}

func (c *counting) counts(a uuid.UUID) (getInfo, renew int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getInfo[a.String()], c.renw[a.String()]
}

func (c *counting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.getInfo, c.renw = map[string]int{}, map[string]int{}
}

// observing is an env whose single node's provider is counted and whose
// workers observe on every pass unless period says otherwise, with a
// worker of that node.
func observing(t *testing.T, maxActive int32, period, keepalive time.Duration) (*env, *node, *counting, *lifecycle.Worker) {
	t.Helper()
	e := newEnvMax(t, 1, maxActive)
	n := e.only(t)
	c := newCounting(n.p)
	e.cfg.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return c, nil }
	e.cfg.ObservePeriod = period
	e.cfg.KeepaliveInterval = keepalive
	return e, n, c, lifecycle.NewWorker(e.cfg, n.id)
}

// running commits a Session on n and passes w until its allocation runs.
func (e *env) running(t *testing.T, w *lifecycle.Worker, n *node) store.SessionBundle {
	t.Helper()
	b := e.createBundle(t, n.id)
	for range 3 {
		pass(t, w)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationRunning || !a.CreateSettled {
		t.Fatalf("allocation %s settled=%v", a.State, a.CreateSettled)
	}
	return b
}

// bundle reads the Session of b as the Session API does.
func (e *env) bundle(t *testing.T, b store.SessionBundle) store.SessionBundle {
	t.Helper()
	got, err := e.svc.Get(context.Background(), projects.All(), b.Session.ID)
	must(t, err)
	return got
}

// engine is a Docker Engine API client of n's fixture: what an operator or
// an engine restart does to a container, from outside Berth.
func engine(t *testing.T, n *node) *client.Client {
	t.Helper()
	cli, err := docker.NewClient(n.srv.Host())
	must(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// wantObserved checks the allocation's last observation and what the
// Session API derives from it; the allocation stays running (an
// observation authorizes no cleanup).
func (e *env) wantObserved(t *testing.T, b store.SessionBundle, compute store.ObservedCompute, reason string) {
	t.Helper()
	got := e.bundle(t, b)
	a := got.Allocation
	if a.State != store.AllocationRunning || a.Observation.At == nil ||
		a.Observation.Compute != compute || a.Observation.Reason != reason {
		t.Fatalf("allocation %s observed %+v, want %s %s", a.State, a.Observation, compute, reason)
	}
	env := sessions.EnvironmentOf(got, store.RuntimeReadiness{})
	wantAvailable := compute == store.ObservedRunning
	wantReason := reason
	if wantAvailable {
		wantReason = ""
	}
	if env.ComputeAvailable != wantAvailable || env.ComputeReason != wantReason {
		t.Fatalf("environment %+v, want available %v reason %q", env, wantAvailable, wantReason)
	}
	if s := sessions.StateOf(got); s != sessions.StateActive {
		t.Fatalf("session %s, want active", s)
	}
}

// nothingCleaned checks that no container or volume was removed by the
// adapter and both of the allocation's volumes are still there.
func nothingCleaned(t *testing.T, n *node, a store.Allocation) {
	t.Helper()
	for _, c := range []string{dockertest.CallContainerKill, dockertest.CallContainerStop, dockertest.CallVolumeRemove,
		dockertest.CallContainerCreate, dockertest.CallContainerStart} {
		if k := count(n.srv, c); k != 0 {
			t.Fatalf("%s called %d times", c, k)
		}
	}
	name := n.p.Name(a.Reference())
	for _, v := range []string{name + "-home", name + "-environment"} {
		if _, ok := n.srv.Volume(v); !ok {
			t.Fatalf("volume %s gone", v)
		}
	}
}

func TestRemovedContainerIsObservedMissingAndSessionComputeUnavailable(t *testing.T) {
	e, n, _, w := observing(t, 8, time.Millisecond, time.Hour)
	b := e.running(t, w, n)
	e.wantObserved(t, b, store.ObservedRunning, lifecycle.ReasonRunning)

	// Removed from outside, through the Engine API (volumes stay).
	before := e.alloc(t, b.Allocation.ID)
	name := n.p.Name(b.Allocation.Reference())
	_, err := engine(t, n).ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true})
	must(t, err)
	n.srv.ResetCalls()
	pass(t, w)
	e.wantObserved(t, b, store.ObservedMissing, lifecycle.ReasonMissing)
	if got := e.alloc(t, b.Allocation.ID); got.Revision != before.Revision {
		t.Fatalf("an observation moved the revision %d to %d", before.Revision, got.Revision)
	}
	for range 3 {
		pass(t, w)
	}
	nothingCleaned(t, n, b.Allocation)
	e.wantObserved(t, b, store.ObservedMissing, lifecycle.ReasonMissing)
}

func TestStoppedContainerIsObservedStoppedAndRunsAgainWhenRestarted(t *testing.T) {
	e, n, _, w := observing(t, 8, time.Millisecond, time.Hour)
	b := e.running(t, w, n)

	// An engine restart leaves a container without restart policy exited.
	name := n.p.Name(b.Allocation.Reference())
	if !n.srv.SetContainerState(name, dockertest.StateExited) {
		t.Fatal("no container")
	}
	n.srv.ResetCalls()
	pass(t, w)
	e.wantObserved(t, b, store.ObservedStopped, lifecycle.ReasonStopped)
	pass(t, w)
	nothingCleaned(t, n, b.Allocation)

	// Core never starts it; once something does, it is observed running.
	n.srv.SetContainerState(name, dockertest.StateRunning)
	pass(t, w)
	e.wantObserved(t, b, store.ObservedRunning, lifecycle.ReasonRunning)
}

func TestFailedObservationIsUnavailableAndCleansNothing(t *testing.T) {
	e, n, _, w := observing(t, 8, time.Millisecond, time.Hour)
	b := e.running(t, w, n)

	n.srv.ResetCalls()
	n.srv.Arm(dockertest.CallContainerInspect, dockertest.FaultServerError, nil)
	pass(t, w)
	e.wantObserved(t, b, store.ObservedUnavailable, lifecycle.ReasonUnavailable)
	nothingCleaned(t, n, b.Allocation)
	if _, ok := n.srv.Container(n.p.Name(b.Allocation.Reference())); !ok {
		t.Fatal("container gone")
	}
	// A dropped connection is no evidence either; the next good read is.
	n.srv.Arm(dockertest.CallContainerInspect, dockertest.FaultDrop, nil)
	pass(t, w)
	e.wantObserved(t, b, store.ObservedUnavailable, lifecycle.ReasonUnavailable)
	pass(t, w)
	e.wantObserved(t, b, store.ObservedRunning, lifecycle.ReasonRunning)
	nothingCleaned(t, n, b.Allocation)
}

// connect accepts a Runtime connection for b's allocation with the
// credential its bootstrap file carries, as the gateway does.
func (e *env) connect(t *testing.T, n *node, b store.SessionBundle) store.RuntimeGrant {
	t.Helper()
	name := n.p.Name(b.Allocation.Reference())
	for _, ar := range n.srv.Archives(name) {
		for _, f := range ar.Entries {
			if !strings.HasSuffix(f.Header.Name, "runtime-bootstrap.json") {
				continue
			}
			var raw struct {
				Credential string `json:"credential"`
			}
			must(t, json.Unmarshal(f.Content, &raw))
			g, err := e.st.AcceptRuntime(context.Background(), store.AcceptRuntimeParams{
				ConnectionID: uuid.New(), DeviceID: b.Allocation.DeviceID,
				Credential: runtimebootstrap.NewSecret(raw.Credential), RuntimeVersion: "test",
			})
			must(t, err)
			return g
		}
	}
	t.Fatal("no bootstrap file")
	return store.RuntimeGrant{}
}

func TestKeepaliveGoesOnlyToConnectedRunningComputeBetweenTurns(t *testing.T) {
	e, n, c, w := observing(t, 8, time.Hour, time.Hour)
	connected := e.running(t, w, n)
	idle := e.running(t, w, n) // never connected
	stopped := e.running(t, w, n)
	cleaning := e.running(t, w, n)
	lapsed := e.running(t, w, n)
	ctx := context.Background()
	// stopped is observed stopped first; cleaning's deletion was requested;
	// lapsed had no keepalive for over an hour.
	n.srv.SetContainerState(n.p.Name(stopped.Allocation.Reference()), dockertest.StateExited)
	_, err := e.st.Pool().Exec(ctx, `UPDATE allocations SET observed_at = NULL, observed_compute = NULL, observed_reason = NULL WHERE id = $1`, stopped.Allocation.ID)
	must(t, err)
	pass(t, w)
	e.wantObserved(t, stopped, store.ObservedStopped, lifecycle.ReasonStopped)
	for _, b := range []store.SessionBundle{connected, stopped, cleaning, lapsed} {
		e.connect(t, n, b)
	}
	_, err = e.svc.Delete(ctx, projects.All(), cleaning.Session.ID)
	must(t, err)
	_, err = e.st.Pool().Exec(ctx, `UPDATE allocations SET updated_at = now() - interval '2 hours' WHERE id = $1`, lapsed.Allocation.ID)
	must(t, err)

	c.reset()
	pass(t, w)
	pass(t, w)
	for _, x := range []struct {
		name  string
		b     store.SessionBundle
		renew int
	}{{"connected", connected, 1}, {"idle", idle, 0}, {"stopped", stopped, 0}, {"cleaning", cleaning, 0}, {"lapsed", lapsed, 0}} {
		if _, r := c.counts(x.b.Allocation.ID); r != x.renew {
			t.Errorf("%s: %d keepalives, want %d", x.name, r, x.renew)
		}
	}
	a := e.alloc(t, connected.Allocation.ID)
	if a.Observation.KeepaliveAt == nil || a.Observation.Compute != store.ObservedRunning {
		t.Fatalf("keepalive not recorded: %+v", a.Observation)
	}
	if e.alloc(t, lapsed.Allocation.ID).Observation.KeepaliveAt != nil {
		t.Fatal("a lapse was revived")
	}

	// The keepalive's Info is an observation: a container removed since
	// is recorded missing, and gets no further keepalive.
	_, err = e.st.Pool().Exec(ctx, `UPDATE allocations SET keepalive_at = now() - interval '2 minutes' WHERE id = $1`, connected.Allocation.ID)
	must(t, err)
	_, err = engine(t, n).ContainerRemove(ctx, n.p.Name(connected.Allocation.Reference()), client.ContainerRemoveOptions{Force: true})
	must(t, err)
	e.cfg.KeepaliveInterval = time.Minute
	w = lifecycle.NewWorker(e.cfg, n.id)
	c.reset()
	pass(t, w)
	pass(t, w)
	if _, r := c.counts(connected.Allocation.ID); r != 1 {
		t.Fatalf("%d keepalives to the removed container, want 1", r)
	}
	e.wantObserved(t, connected, store.ObservedMissing, lifecycle.ReasonMissing)
}

func TestObservationPagesWrap(t *testing.T) {
	const sessions = store.NodePageSize + 2
	e, n, c, w := observing(t, sessions, time.Hour, time.Hour)
	var ids []uuid.UUID
	for range sessions {
		ids = append(ids, e.createBundle(t, n.id).Allocation.ID)
	}
	for range 4 {
		pass(t, w)
	}
	forget := func() {
		t.Helper()
		_, err := e.st.Pool().Exec(context.Background(), `UPDATE allocations SET observed_at = NULL, observed_compute = NULL, observed_reason = NULL`)
		must(t, err)
	}
	total := func() int {
		k := 0
		for _, id := range ids {
			g, _ := c.counts(id)
			k += g
		}
		return k
	}
	for _, id := range ids {
		if a := e.alloc(t, id); a.State != store.AllocationRunning {
			t.Fatalf("allocation %s", a.State)
		}
	}
	// A fresh worker's cursor starts at the beginning: one page, then the
	// rest, then it wraps.
	forget()
	w = lifecycle.NewWorker(e.cfg, n.id)
	c.reset()
	pass(t, w)
	if k := total(); k != store.NodePageSize {
		t.Fatalf("first pass observed %d", k)
	}
	pass(t, w)
	if k := total(); k != sessions {
		t.Fatalf("two passes observed %d", k)
	}
	for _, id := range ids {
		if g, _ := c.counts(id); g != 1 {
			t.Fatalf("allocation observed %d times", g)
		}
	}
	forget()
	c.reset()
	pass(t, w) // the wrapped cursor's page: the first 32 again
	if k := total(); k != store.NodePageSize {
		t.Fatalf("after the wrap %d", k)
	}
}

func TestUnreachableNodeIsReportedUnavailableNotAvailable(t *testing.T) {
	e, n, c, w := observing(t, 8, time.Millisecond, time.Hour)
	b := e.running(t, w, n)
	e.wantObserved(t, b, store.ObservedRunning, lifecycle.ReasonRunning)

	// The node's connection is gone: the pass fails, claims nothing, and
	// records the running compute unobservable.
	down := e.cfg
	down.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return nil, errdefs.ErrNotFound }
	wd := lifecycle.NewWorker(down, n.id)
	n.srv.ResetCalls()
	if err := wd.Pass(context.Background()); err == nil {
		t.Fatal("pass without a provider succeeded")
	}
	e.wantObserved(t, b, store.ObservedUnavailable, lifecycle.ReasonUnavailable)
	if calls := n.srv.CallNames(); len(calls) != 0 {
		t.Fatalf("engine calls without a provider: %v", calls)
	}
	// Back: observed running again.
	c.reset()
	pass(t, w)
	e.wantObserved(t, b, store.ObservedRunning, lifecycle.ReasonRunning)
}

// TestRefusedNodeIsReportedWithTheRefusalsReason: while Core refuses to
// call a node (its agent is back on another backend than its binding:
// the provider function answers with a refusal), a pass sends nothing and
// records the running compute unavailable with the refusal's fixed reason
// (what the Session API reports as compute_reason).
func TestRefusedNodeIsReportedWithTheRefusalsReason(t *testing.T) {
	e, n, c, w := observing(t, 8, time.Millisecond, time.Hour)
	b := e.running(t, w, n)
	e.wantObserved(t, b, store.ObservedRunning, lifecycle.ReasonRunning)

	refused := e.cfg
	refused.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) {
		return nil, errdefs.Refuse(errdefs.ErrFailedPrecondition, lifecycle.ReasonBackendMismatch, "another backend")
	}
	wr := lifecycle.NewWorker(refused, n.id)
	n.srv.ResetCalls()
	if err := wr.Pass(context.Background()); err == nil {
		t.Fatal("a refused pass succeeded")
	}
	e.wantObserved(t, b, store.ObservedUnavailable, lifecycle.ReasonBackendMismatch)
	if calls := n.srv.CallNames(); len(calls) != 0 {
		t.Fatalf("engine calls while the node is refused: %v", calls)
	}
	c.reset()
	pass(t, w)
	e.wantObserved(t, b, store.ObservedRunning, lifecycle.ReasonRunning)
}

func TestNoKeepaliveWhileATurnRuns(t *testing.T) {
	e, n, c, w := observing(t, 8, time.Hour, time.Hour)
	b := e.running(t, w, n)
	startTurn(t, e.st, e.connect(t, n, b), b.Session.ID)

	c.reset()
	pass(t, w)
	if _, r := c.counts(b.Allocation.ID); r != 0 {
		t.Fatalf("%d keepalives during a Turn", r)
	}
}

func TestFailedKeepaliveIsFollowedByAnObservationAndConfirmsNothing(t *testing.T) {
	e, n, c, w := observing(t, 8, time.Hour, time.Hour)
	b := e.running(t, w, n)
	e.connect(t, n, b)

	// The keepalive's read fails (its outcome is unknown); the GetInfo
	// that follows it observes the compute running.
	n.srv.Arm(dockertest.CallContainerInspect, dockertest.FaultServerError, nil)
	c.reset()
	pass(t, w)
	g, r := c.counts(b.Allocation.ID)
	if r != 1 || g != 1 {
		t.Fatalf("renew %d getinfo %d, want 1 and 1", r, g)
	}
	a := e.alloc(t, b.Allocation.ID)
	if a.Observation.Compute != store.ObservedRunning || a.Observation.KeepaliveAt != nil {
		t.Fatalf("observation %+v", a.Observation)
	}
	// Still due: the next pass renews.
	c.reset()
	pass(t, w)
	if _, r := c.counts(b.Allocation.ID); r != 1 {
		t.Fatalf("renew %d on the next pass", r)
	}
	if a := e.alloc(t, b.Allocation.ID); a.Observation.KeepaliveAt == nil {
		t.Fatal("keepalive not recorded")
	}
}

// startTurn prepares the Runtime connection g and starts a long Turn of
// session on it, as the gateway does: the Session has a running Turn.
func startTurn(t *testing.T, st *storetest.Owned, g store.RuntimeGrant, session uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	_, err := st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	script := "sleep 3600"
	_, _, err = st.SubmitTurn(ctx, store.SubmitTurnParams{
		ID: uuid.New(), SessionID: session, RequestID: uuid.New(), RequestDigest: make([]byte, 32),
		ShellScript: &script, WorkingDirectory: "/workspace",
		Input:   store.SealedCredential{Ciphertext: make([]byte, 20), Nonce: make([]byte, 12)},
		Timeout: time.Hour, QueueTimeout: time.Minute, MaxOutputBytes: 10,
	})
	must(t, err)
	turn, ok, err := st.ClaimNextTurn(ctx, g.Conn)
	must(t, err)
	if !ok {
		t.Fatal("nothing claimed")
	}
	_, err = st.MarkTurnStarted(ctx, turn.ID, g.Conn)
	must(t, err)
}
