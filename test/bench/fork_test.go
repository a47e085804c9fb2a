package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/benchstat"
	"berth.dev/test/internal/stack"
)

// forkSpec is the deployment of the fork benchmark: the measured
// cluster's sandbox size, with room on one node for a source and its
// children (a fork places them on the source's node).
var forkSpec = &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 128, MaxRetained: 4}

// forkOvercommit is the node agents' cpu_overcommit in the fork
// benchmark: at the default (1) this 2-core machine's node fits 6
// sandboxes of 250 millicores, fewer than K1's 11.
const forkOvercommit = 8.0

// forkBytes is K1's workspace: 100 MB written by a Turn.
const forkBytes = 100_000_000

// forkReport is BenchmarkFork's JSON: the rows and K2's counts.
type forkReport struct {
	Time     time.Time `json:"time"`
	Samples  int       `json:"samples"`
	Core     string    `json:"core"`
	Measures []*row    `json:"measures"`
	K2       k2Result  `json:"k2"`
}

// k2Result is K2: a fork of k2Count over the fleet's node agents.
type k2Result struct {
	Requested      int     `json:"requested"`
	Nodes          int     `json:"nodes"`
	Placed         int     `json:"placed"`
	UnplacedReason string  `json:"unplaced_reason"`
	Admitted       int     `json:"admitted"`
	Failed         int     `json:"failed"`
	WallSeconds    float64 `json:"wall_seconds"`
}

// k2Count is K2's fork size (issue 33: 100 children over 4 node agents).
const k2Count = 100

// BenchmarkFork measures issue 33's fork rows against a berth-core at its
// defaults (TLS, default intervals; the node agents overcommit CPU
// forkOvercommit times so that one node holds the children):
//
//   - K1: ForkSession of a Session with 100 MB in its workspace into 10
//     children, from the call until all 10 are execution admitted; a
//     bound, goal 3 s;
//   - K1p: the source's pause during that fork, from the engine's pause
//     and unpause events of its container; a bound, goal 300 ms;
//   - K1f: K1 once 4 node agents serve (one engine: the children spread
//     over the agents, those off the source's node seeded by an import
//     Core relays); the same bound;
//   - K2: one fork into 100 children with 4 node agents: how many were
//     placed (and why not more), admitted and failed, and the wall time.
//
// Run it with `make bench-fork`; BERTH_BENCH_SAMPLES samples of K1
// (default 5), K2 once.
func BenchmarkFork(b *testing.B) {
	samples := benchstat.EnvInt(b, "BERTH_BENCH_SAMPLES", 5)
	rep := runFork(b, samples, 10, k2Count, true)
	printForkReport(os.Stdout, rep)
	benchstat.Save(b, "BERTH_BENCH_JSON", filepath.Join(stack.RepoRoot(), ".run", "bench-fork.json"), rep)
}

// TestForkBenchSmoke runs BenchmarkFork's measures once, small (2
// children, then 4 over the fleet), so that the benchmark cannot rot. It
// asserts nothing about time.
func TestForkBenchSmoke(t *testing.T) {
	testenv.SkipShort(t, "a Docker Engine, PostgreSQL and the runtime image")
	rep := runFork(t, 1, 2, 4, false)
	var w strings.Builder
	printForkReport(&w, rep)
	t.Log(w.String())
	for _, r := range rep.Measures {
		if len(r.berth) != 1 {
			t.Errorf("%s: %d samples, want 1", r.ID, len(r.berth))
		}
	}
	if rep.K2.Placed != 4 || rep.K2.Admitted != 4 || rep.K2.Nodes != fleetNodes {
		t.Errorf("K2 smoke: %+v, want 4 placed and admitted", rep.K2)
	}
}

// runFork measures K1 (samples times, children each) and K2 (one fork of
// k2 children once fleetNodes node agents serve).
func runFork(t testing.TB, samples, children, k2 int, defaults bool) forkReport {
	t.Helper()
	host := testenv.DockerHost(t)
	engine, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	coreOpts, gateway := stack.RuntimeGateway(t, engine)
	coreOpts.PublicURL = "https://" + gateway
	coreOpts.Defaults = defaults
	overcommit := forkOvercommit
	nodeOpts := stack.NodeOptions{Network: "bridge", Capacity: map[string]any{"cpu_overcommit": overcommit}}
	c := stack.OneNodeCluster(t, forkSpec, coreOpts, nodeOpts)
	r := &rig{t: t, ctx: c.Ctx, cluster: c, host: host, nodes: []*stack.Node{c.Node},
		sessions: adminv1.NewSessionServiceClient(c.CC), turns: adminv1.NewTurnServiceClient(c.CC)}
	settings, _ := stack.Settings(c.Core, r.nodes...)
	k1 := &row{ID: "K1", Kind: bound, Goal: 3,
		Measure:  fmt.Sprintf("ForkSession of a 100 MB workspace into %d, until every child is execution admitted", children),
		Baseline: "none, a bound (issue 33's goal)"}
	k1p := &row{ID: "K1p", Kind: bound, Goal: 0.3,
		Measure:  "the source's pause during that fork (the engine's pause and unpause events)",
		Baseline: "none, a bound (issue 33's goal)"}
	for range samples {
		d, pause := r.forkAdmitted(children)
		k1.add(d, 0, 0)
		k1p.add(pause, 0, 0)
	}
	node := nodeOpts
	node.Socket, node.Image, node.Specification = strings.TrimPrefix(host, "unix://"), testenv.RuntimeImage(t), forkSpec
	for range fleetNodes - 1 {
		n := stack.EnrollAndStart(t, c.Core, c.Ctx, c.CC, c.Installation, node, "")
		r.nodes = append(r.nodes, n)
	}
	stack.EnableAll(t, c.Ctx, c.CC)
	k1f := &row{ID: "K1f", Kind: bound, Goal: 3,
		Measure:  fmt.Sprintf("K1 with %d node agents on the one engine (children spread, seeded by relayed imports)", fleetNodes),
		Baseline: "none, a bound (issue 33's goal)"}
	for range samples {
		d, _ := r.forkAdmitted(children)
		k1f.add(d, 0, 0)
	}
	for _, x := range []*row{k1, k1p, k1f} {
		x.summarize()
	}
	return forkReport{Time: time.Now().UTC(), Samples: samples, Core: settings, Measures: []*row{k1, k1p, k1f}, K2: r.forkFleet(k2)}
}

// forkAdmitted is one K1 sample: a Session with forkBytes in its
// workspace is forked into n; it returns the time from the call until
// every child is execution admitted and the source's pause (its
// container's pause to unpause events, read live: the engine keeps only
// its last 256 events, fewer than a fork of 10 makes), then deletes them
// all.
func (r *rig) forkAdmitted(n int) (time.Duration, time.Duration) {
	r.t.Helper()
	_, source := r.admitted()
	r.runShell(source, fmt.Sprintf("head -c %d /dev/urandom > /workspace/data", forkBytes))
	pause := r.watchPause(r.sessionContainer(source))
	since := time.Now()
	resp, err := r.sessions.ForkSession(r.ctx, &adminv1.ForkSessionRequest{Name: source, RequestId: uuid.NewString(), Count: int32(n), MinCount: int32(n)})
	if err != nil {
		r.t.Fatalf("ForkSession: %v", err)
	}
	names := childNames(resp)
	r.waitAdmitted(names)
	d := time.Since(since)
	p := pause()
	if p == 0 {
		r.t.Fatal("the engine reported no pause and unpause of the running source during its fork")
	}
	r.deleteAll(append(names, source))
	return d, p
}

// waitAdmitted polls every name until each is execution admitted; a
// FAILED one fails the benchmark.
func (r *rig) waitAdmitted(names []string) {
	r.t.Helper()
	deadline := time.Now().Add(sampleTimeout)
	for _, name := range names {
		for {
			g, err := r.sessions.GetSession(r.ctx, &adminv1.GetSessionRequest{Name: name})
			if err != nil {
				r.t.Fatal(err)
			}
			s := g.GetSession()
			if s.GetState() == adminv1.Session_STATE_FAILED {
				r.t.Fatalf("%s failed: %s", name, s.GetEnvironment().GetFailureCode())
			}
			if s.GetEnvironment().GetExecutionAdmitted() {
				break
			}
			if time.Now().After(deadline) {
				r.t.Fatalf("%s not admitted after %v", name, sampleTimeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// watchPause subscribes to the engine's pause and unpause events of
// container; the function it returns ends the subscription and gives the
// time between the first pause and the unpause after it (0 without one).
func (r *rig) watchPause(container string) func() time.Duration {
	r.t.Helper()
	ctx, cancel := context.WithCancel(r.ctx)
	res := r.cluster.Engine.Events(ctx, client.EventsListOptions{
		Filters: client.Filters{}.Add("type", "container").Add("container", container).Add("event", "pause").Add("event", "unpause")})
	window := make(chan time.Duration, 1)
	go func() {
		var paused int64
		for {
			select {
			case m := <-res.Messages:
				switch {
				case m.Action == events.ActionPause && paused == 0:
					paused = m.TimeNano
				case m.Action == events.ActionUnPause && paused != 0:
					window <- time.Duration(m.TimeNano - paused)
					return
				}
			case <-res.Err:
				window <- 0
				return
			}
		}
	}()
	// The subscription is live once the engine answered its first byte;
	// a moment's wait keeps the fork's pause from preceding it.
	time.Sleep(100 * time.Millisecond)
	return func() time.Duration {
		defer cancel()
		select {
		case d := <-window:
			return d
		case <-time.After(5 * time.Second):
			return 0
		}
	}
}

// forkFleet is K2: a Session forked into n over the fleet; it counts
// what was placed, admitted and failed, and the wall time until every
// placed child is admitted or failed, then deletes them all.
func (r *rig) forkFleet(n int) k2Result {
	r.t.Helper()
	_, source := r.admitted()
	r.runShell(source, "head -c 10000000 /dev/urandom > /workspace/data")
	out := k2Result{Requested: n, Nodes: len(r.nodes)}
	start := time.Now()
	resp, err := r.sessions.ForkSession(r.ctx, &adminv1.ForkSessionRequest{Name: source, RequestId: uuid.NewString(), Count: int32(n)})
	if err != nil {
		r.t.Fatalf("ForkSession of %d: %v", n, err)
	}
	names := childNames(resp)
	out.Placed, out.UnplacedReason = int(resp.GetPlaced()), resp.GetUnplacedReason()
	deadline := time.Now().Add(10 * time.Minute)
	for pending := names; len(pending) > 0 && time.Now().Before(deadline); {
		var next []string
		for _, name := range pending {
			g, err := r.sessions.GetSession(r.ctx, &adminv1.GetSessionRequest{Name: name})
			if err != nil {
				r.t.Fatal(err)
			}
			switch s := g.GetSession(); {
			case s.GetState() == adminv1.Session_STATE_FAILED:
				out.Failed++
			case s.GetEnvironment().GetExecutionAdmitted():
				out.Admitted++
			default:
				next = append(next, name)
			}
		}
		pending = next
		time.Sleep(100 * time.Millisecond)
	}
	out.WallSeconds = time.Since(start).Seconds()
	r.deleteAll(append(names, source))
	return out
}

func childNames(resp *adminv1.ForkSessionResponse) []string {
	var names []string
	for _, c := range resp.GetChildren() {
		names = append(names, c.GetName())
	}
	return names
}

// printForkReport prints the rows and K2.
func printForkReport(w io.Writer, rep forkReport) {
	fmt.Fprintf(w, "\nBerth fork benchmarks: %d samples of K1; %s\n\n", rep.Samples, rep.Core)
	for _, r := range rep.Measures {
		verdict := "met"
		if !r.MeetsGoal {
			verdict = "missed"
		}
		fmt.Fprintf(w, "%-4s %-100s median %8.1f ms  p99 (max) %8.1f ms  goal %5.1f s  %s\n", r.ID, r.Measure, r.BerthMedianMS, r.BerthP99MS, r.Goal, verdict)
	}
	k := rep.K2
	fmt.Fprintf(w, "K2   ForkSession into %d with %d node agents: %d placed (unplaced: %q), %d admitted, %d failed, %.1f s until every placed child was admitted or failed\n",
		k.Requested, k.Nodes, k.Placed, k.UnplacedReason, k.Admitted, k.Failed, k.WallSeconds)
}
