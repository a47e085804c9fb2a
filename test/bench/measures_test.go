package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// spec is the deployment of the measured cluster. It suspends Sessions
// idle for a minute (the least it accepts), for P8; the other measures
// never leave a Session idle that long.
var spec = &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4,
	Suspension: &adminv1.SuspensionPolicy{Idle: durationpb.New(time.Minute), Retention: durationpb.New(time.Hour)}}

// sampleTimeout bounds one sample of any measure.
const sampleTimeout = 2 * time.Minute

// rig is a real berth-core serving the Runtime gateway on the engine's
// bridge, fleetNodes enrolled node agents on the one engine whose
// containers use the bridge (the last reached through a proxy), and the
// baseline's own adapter configuration.
type rig struct {
	t testing.TB
	// rss is P11, the Runtime's idle memory, sampled in P1's Sessions.
	rss *memory
	// phases is P1's breakdown.
	phases   *phases
	ctx      context.Context
	cluster  *stack.Cluster
	sessions adminv1.SessionServiceClient
	turns    adminv1.TurnServiceClient
	// baseline is the Docker adapter configured as the node agent
	// configures it, under an installation of its own so that nothing of
	// Berth's sees its resources; only its ContainerCreateOptions is used.
	baseline *docker.Provider
	res      sandbox.Resources
	// listener is where the baseline's container connects: the bridge
	// gateway, as the Runtime reaches Core's gateway.
	listener  net.Listener
	host      string
	dockerCLI string // "" without the docker CLI on PATH
	// victim is the fleet's node behind a proxy, which P6 harms.
	victim *victim
	// nodes are the cluster's node agents, whose configuration the
	// report's header reads.
	nodes []*stack.Node
}

// newRig starts the cluster; defaults runs Core at its default intervals
// (the benchmark), otherwise at the tests' short ones (the smoke test).
func newRig(t testing.TB, defaults bool) *rig {
	t.Helper()
	host := testenv.DockerHost(t)
	engine, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	// The gateway serves TLS from the installation CA, as berth-core
	// serve does unless told --runtime-insecure.
	coreOpts, gateway := stack.RuntimeGateway(t, engine)
	coreOpts.PublicURL = "https://" + gateway
	coreOpts.Defaults = defaults
	// The nodes run at their default capacity (host reserve, no CPU
	// overcommit), as installed.
	nodeOpts := stack.NodeOptions{Network: "bridge", Capacity: map[string]any{}}
	c := stack.OneNodeCluster(t, spec, coreOpts, nodeOpts)
	profile, err := docker.LoadSeccompProfile(filepath.Join(stack.RepoRoot(), "deploy", "runtime", "seccomp.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{
		t: t, ctx: c.Ctx, cluster: c, host: host,
		sessions: adminv1.NewSessionServiceClient(c.CC),
		turns:    adminv1.NewTurnServiceClient(c.CC),
		res:      sandbox.Resources{CPUMillis: spec.GetCpuMillis(), MemoryBytes: spec.GetMemoryBytes(), DiskBytes: spec.GetDiskBytes()},
	}
	baselineInst := uuid.NewString()
	stack.Track(baselineInst)
	r.baseline = docker.New(c.Engine, docker.Options{
		InstallationID: baselineInst,
		Config: docker.NodeConfig{
			Socket: strings.TrimPrefix(host, "unix://"), Image: testenv.RuntimeImage(t), Network: "bridge",
			SeccompProfile: filepath.Join(stack.RepoRoot(), "deploy", "runtime", "seccomp.json"),
		},
		Seccomp: profile,
	})
	t.Cleanup(func() {
		if n, v := stack.RemoveOwned(t, c.Engine, baselineInst); n+v > 0 {
			t.Errorf("the baseline left %d containers and %d volumes", n, v)
		}
	})
	r.listener, err = net.Listen("tcp", net.JoinHostPort(stack.BridgeGateway(t, c.Engine), "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.listener.Close() })
	if p, err := exec.LookPath("docker"); err == nil {
		r.dockerCLI = p
	}
	nodeOpts.Socket, nodeOpts.Image, nodeOpts.Specification = strings.TrimPrefix(host, "unix://"), testenv.RuntimeImage(t), spec
	r.nodes = []*stack.Node{c.Node}
	r.victim = r.addFleet(nodeOpts)
	return r
}

// admitted is P1's Berth side: CreateSession until GetSession reports
// execution admitted. It returns the time and the Session's name.
func (r *rig) admitted() (time.Duration, string) {
	r.t.Helper()
	start := time.Now()
	resp, err := r.sessions.CreateSession(r.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		r.t.Fatalf("CreateSession: %v", err)
	}
	name := resp.GetSession().GetName()
	for {
		g, err := r.sessions.GetSession(r.ctx, &adminv1.GetSessionRequest{Name: name})
		if err != nil {
			r.t.Fatalf("GetSession: %v", err)
		}
		if g.GetSession().GetEnvironment().GetExecutionAdmitted() {
			return time.Since(start), name
		}
		if s := g.GetSession().GetState(); s == adminv1.Session_STATE_FAILED || time.Since(start) > sampleTimeout {
			r.t.Fatalf("%s not admitted: %v", name, g.GetSession())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deleteSession deletes a Session and waits until its cleanup is
// confirmed (state DELETED), so that the next sample starts from nothing.
func (r *rig) deleteSession(name string) {
	r.t.Helper()
	if _, err := r.sessions.DeleteSession(r.ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
		r.t.Fatalf("DeleteSession: %v", err)
	}
	r.deleted(name)
}

// deleted waits until a deleted Session's cleanup is confirmed.
func (r *rig) deleted(name string) {
	r.t.Helper()
	stack.WaitFor(r.t, sampleTimeout, name+" deleted", func() bool {
		g, err := r.sessions.GetSession(r.ctx, &adminv1.GetSessionRequest{Name: name})
		if err != nil {
			r.t.Fatalf("GetSession: %v", err)
		}
		return g.GetSession().GetState() == adminv1.Session_STATE_DELETED
	})
}

// engineListening is P1's baseline: one engineStart until its first
// process reaches the listener. Everything is removed afterwards, untimed.
// Beside the sample it returns the times that split it as P1's phases
// split Berth's: when it began, when the engine started the container
// (its State.StartedAt) and when the process connected.
func (r *rig) engineListening() (d time.Duration, began, started, connected time.Time) {
	r.t.Helper()
	began, connected = r.engineBatchThen(1, func(refs []sandbox.Reference) {
		started = r.startedAt(r.baseline.ContainerCreateOptions(refs[0], r.res).Name)
	})
	return connected.Sub(began), began, started, connected
}

// engineBatch is the engine alone doing what n Sessions need at once, with
// n goroutines: each creates the adapter's two volumes and its exact
// container (its own ContainerCreateOptions, with busybox nc as the first
// process in place of the Runtime) and starts it. It returns the time
// until every container's first process has connected to the listener on
// this host; everything is removed afterwards, untimed.
func (r *rig) engineBatch(n int) time.Duration {
	r.t.Helper()
	began, connected := r.engineBatchThen(n, nil)
	return connected.Sub(began)
}

// engineBatchThen is engineBatch returning when it began and when the
// last container connected; then, when not nil, is called with the refs
// before anything is removed.
func (r *rig) engineBatchThen(n int, then func([]sandbox.Reference)) (began, connected time.Time) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sampleTimeout)
	defer cancel()
	refs := make([]sandbox.Reference, n)
	for i := range refs {
		refs[i] = contracttest.NewReference()
	}
	defer r.removeBaseline(refs)
	accepted := make(chan error, 1)
	var last time.Time
	began = time.Now()
	go func() {
		for range n {
			conn, err := r.listener.Accept()
			if err != nil {
				accepted <- err
				return
			}
			last = time.Now()
			_ = conn.Close()
		}
		accepted <- nil
	}()
	started := make(chan error, n)
	for _, ref := range refs {
		go func() { started <- r.engineStart(ctx, ref) }()
	}
	for range n {
		if err := <-started; err != nil {
			r.t.Fatalf("baseline: %v", err)
		}
	}
	select {
	case err := <-accepted:
		if err != nil {
			r.t.Fatalf("baseline accept: %v", err)
		}
	case <-ctx.Done():
		_ = r.listener.Close() // ends the Accept; the rig is unusable now
		r.t.Fatal("the baseline containers never connected")
	}
	if then != nil {
		then(refs)
	}
	return began, last
}

// engineStart creates ref's two volumes and container as the adapter
// would and starts the container, whose first process connects to the
// rig's listener.
func (r *rig) engineStart(ctx context.Context, ref sandbox.Reference) error {
	cli := r.cluster.Engine
	opts := r.baseline.ContainerCreateOptions(ref, r.res)
	gw, port, _ := net.SplitHostPort(r.listener.Addr().String())
	opts.Config.Cmd = []string{"/bin/busybox", "nc", gw, port}
	for _, v := range []string{r.baseline.HomeVolume(ref), r.baseline.EnvironmentVolume(ref)} {
		if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: v, Driver: "local", Labels: r.baseline.Labels(ref)}); err != nil {
			return fmt.Errorf("volume: %w", err)
		}
	}
	created, err := cli.ContainerCreate(ctx, opts)
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	return nil
}

// removeBaseline removes the baseline's containers and volumes of refs.
func (r *rig) removeBaseline(refs []sandbox.Reference) {
	cli := r.cluster.Engine
	for _, ref := range refs {
		_, _ = cli.ContainerRemove(context.Background(), r.baseline.ContainerCreateOptions(ref, r.res).Name, client.ContainerRemoveOptions{Force: true})
		for _, v := range []string{r.baseline.HomeVolume(ref), r.baseline.EnvironmentVolume(ref)} {
			_, _ = cli.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{Force: true})
		}
	}
}

// turnTrue is P2's Berth side: SubmitTurn of `true`, its output stream to
// the end, and GetTurn's result.
func (r *rig) turnTrue(session string) time.Duration {
	_, d := r.runTurn(session, &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: []string{"true"}}}})
	return d
}

// runTurn submits a Turn, streams its output to the end and reads its
// result, which must be COMPLETED with exit code 0; it returns the
// standard output and the time all of that took.
func (r *rig) runTurn(session string, cmd *adminv1.Command) (string, time.Duration) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, sampleTimeout)
	defer cancel()
	start := time.Now()
	sub, err := r.turns.SubmitTurn(ctx, &adminv1.SubmitTurnRequest{Parent: session, RequestId: uuid.NewString(), Turn: &adminv1.Turn{Command: cmd}})
	if err != nil {
		r.t.Fatalf("SubmitTurn: %v", err)
	}
	name := sub.GetTurn().GetName()
	st, err := r.turns.StreamTurnOutput(ctx, &adminv1.StreamTurnOutputRequest{Name: name})
	if err != nil {
		r.t.Fatalf("StreamTurnOutput: %v", err)
	}
	var out strings.Builder
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			r.t.Fatalf("StreamTurnOutput: %v", err)
		}
		if m.GetStream() == adminv1.OutputStream_OUTPUT_STREAM_STDOUT {
			out.Write(m.GetData())
		}
	}
	got, err := r.turns.GetTurn(ctx, &adminv1.GetTurnRequest{Name: name})
	if err != nil {
		r.t.Fatalf("GetTurn: %v", err)
	}
	d := time.Since(start)
	if got.GetTurn().GetState() != adminv1.Turn_STATE_COMPLETED || got.GetTurn().GetExitCode() != 0 {
		r.t.Fatalf("turn: %v", got.GetTurn())
	}
	return out.String(), d
}

// sessionContainer is the engine's id of a Session's container.
func (r *rig) sessionContainer(session string) string {
	r.t.Helper()
	g, err := r.sessions.GetSession(r.ctx, &adminv1.GetSessionRequest{Name: session})
	if err != nil {
		r.t.Fatal(err)
	}
	allocation := strings.TrimPrefix(g.GetSession().GetAllocation(), "allocations/")
	cs, err := r.cluster.Engine.ContainerList(r.ctx, client.ContainerListOptions{
		Filters: client.Filters{}.Add("label", docker.LabelAllocation+"="+allocation),
	})
	if err != nil || len(cs.Items) != 1 {
		r.t.Fatalf("the Session's container: %d found, %v", len(cs.Items), err)
	}
	return cs.Items[0].ID
}

// startedAt is when the engine started container (its State.StartedAt).
func (r *rig) startedAt(container string) time.Time {
	r.t.Helper()
	c, err := r.cluster.Engine.ContainerInspect(r.ctx, container, client.ContainerInspectOptions{})
	if err != nil {
		r.t.Fatalf("inspect the Session's container: %v", err)
	}
	started, err := time.Parse(time.RFC3339Nano, c.Container.State.StartedAt)
	if err != nil {
		r.t.Fatalf("the container's StartedAt: %v", err)
	}
	return started
}

// engineExec is P2's baseline: an Engine API exec of `true` in container
// as the Runtime user, created, started attached, read to its end, and its
// exit code read.
func engineExec(t testing.TB, cli *client.Client, container string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sampleTimeout)
	defer cancel()
	start := time.Now()
	created, err := cli.ExecCreate(ctx, container, client.ExecCreateOptions{
		User: docker.RuntimeUser, AttachStdout: true, AttachStderr: true, Cmd: []string{"true"},
	})
	if err != nil {
		t.Fatalf("exec create: %v", err)
	}
	attached, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec start: %v", err)
	}
	_, err = io.Copy(io.Discard, attached.Reader)
	attached.Close()
	if err != nil {
		t.Fatalf("exec output: %v", err)
	}
	for {
		res, err := cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			t.Fatalf("exec inspect: %v", err)
		}
		if !res.Running {
			if res.ExitCode != 0 {
				t.Fatalf("exec exit code %d", res.ExitCode)
			}
			return time.Since(start)
		}
		time.Sleep(time.Millisecond)
	}
}

// cliExec is `docker exec -u RUNTIME_USER container true`, printed beside
// the table, never a ratio's denominator. Without the CLI it is zero.
func cliExec(t testing.TB, dockerCLI, host, container string) time.Duration {
	t.Helper()
	if dockerCLI == "" {
		return 0
	}
	start := time.Now()
	if out, err := exec.Command(dockerCLI, "-H", host, "exec", "-u", docker.RuntimeUser, container, "true").CombinedOutput(); err != nil {
		t.Fatalf("docker exec: %v: %s", err, out)
	}
	return time.Since(start)
}

// measure runs P1, P2 and P3 with samples samples each and returns their
// rows, P11 and P1's phases; defaults starts Core at its default
// intervals.
func measure(t testing.TB, samples int, defaults bool) (rows []*row, rss *memory, ph *phases, settings string) {
	t.Helper()
	r := newRig(t, defaults)
	settings, atDefaults := stack.Settings(r.cluster.Core, r.nodes...)
	if defaults && !atDefaults {
		t.Fatalf("the benchmark measures Berth at its defaults, but it runs %s", settings)
	}
	p1 := &row{ID: "P1", Kind: latency, Measure: "Session create to execution admitted", Baseline: "engine: volumes, container, start, first process reaches a host listener", Goal: 1.15}
	r.rss = &memory{Measure: "P11 Runtime idle resident memory (engine's ps of the Session's container)", GoalBytes: runtimeIdleGoal}
	r.phases = newPhases()
	for range samples {
		d, name := r.admitted()
		seen := time.Now()
		r.phases.add(t, r.cluster.Core.DSN, name, r.startedAt(r.sessionContainer(name)), seen)
		bd, began, started, connected := r.engineListening()
		r.phases.addBaseline(started.Sub(began), connected.Sub(started))
		p1.add(d, bd, 0)
		time.Sleep(idleSettle)
		r.rss.sample(t, r.cluster.Engine, r.sessionContainer(name))
		r.deleteSession(name)
	}

	p2 := &row{ID: "P2", Kind: latency, Measure: "Turn round trip (true)", Baseline: "engine: exec create, start, exit code in the same container", Goal: 0.25}
	_, session := r.admitted()
	container := r.sessionContainer(session)
	for range samples {
		p2.add(r.turnTrue(session), engineExec(t, r.cluster.Engine, container), cliExec(t, r.dockerCLI, r.host, container))
	}
	r.deleteSession(session)

	p3 := &row{ID: "P3", Kind: latency, Measure: "RunCommand(true) via Core's proxy and a node agent", Baseline: "the Docker adapter in process", Goal: 1.10}
	inst, n, cli := stack.EngineNode(t)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	ctx := context.Background()
	ref := contracttest.NewReference()
	info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources))
	if err != nil {
		t.Fatalf("Create via the node: %v", err)
	}
	direct := docker.New(cli, docker.Options{InstallationID: inst.ID, Config: docker.NodeConfig{Image: testenv.RuntimeImage(t), Network: "none"}})
	cmd := sandbox.Command{Args: []string{"true"}}
	run := func(p interface {
		RunCommand(context.Context, sandbox.Reference, sandbox.Command) (sandbox.CommandResult, error)
	}) time.Duration {
		start := time.Now()
		res, err := p.RunCommand(ctx, ref, cmd)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("RunCommand: %+v, %v", res, err)
		}
		return time.Since(start)
	}
	for range samples {
		p3.add(run(proxy), run(direct), cliExec(t, r.dockerCLI, r.host, info.ProviderID))
	}
	if err := proxy.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill via the node: %v", err)
	}

	p4 := &row{ID: "P4", Kind: throughput, Batch: fleetSize, Goal: 0.9,
		Measure:  fmt.Sprintf("Sessions per second, %d at once over %d node agents", fleetSize, fleetNodes),
		Baseline: fmt.Sprintf("engine: P1's baseline for %d containers at once", fleetSize)}
	for range samples {
		d, names := r.fleetAdmitted()
		p4.add(d, r.engineBatch(fleetSize), 0)
		r.deleteAll(names)
	}

	rows = []*row{p1, p2, p3, p4}
	for _, f := range faults {
		p6 := &row{ID: f.id, Kind: bound, Goal: 15, Measure: "node not connected (so not placed on): " + f.what,
			Baseline: fmt.Sprintf("none, a bound: %d samples (each costs a keepalive timeout and a reconnection)", min(samples, p6Samples))}
		for range min(samples, p6Samples) {
			p6.add(r.detect(r.victim, f), 0, 0)
		}
		rows = append(rows, p6)
	}
	rows = append(rows, r.suspensionRows(samples)...)
	rows = append(rows, r.filesRows(samples)...)
	rows = append(rows, checkpointRows(t, samples)...)
	return append(rows, failoverRows(t, samples, defaults)...), r.rss, r.phases, settings
}

// p6Samples caps P6's samples per fault: a stopped or cut-off node costs
// a keepalive timeout and a reconnection each.
const p6Samples = 5
