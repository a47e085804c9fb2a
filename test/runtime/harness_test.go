package runtime

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

// env is one running installation: berth-core with its Runtime gateway on
// the engine's bridge, enrolled node agents (one unless newEnvNodes says)
// whose containers use the bridge, and a committed deployment.
type env struct {
	t              testing.TB
	core           *stack.Core
	node           *stack.Node
	nodes          []*stack.Node
	cc             *grpc.ClientConn
	ctx            context.Context
	docker         *client.Client
	installationID string
	dsn, stateDir  string
	coreOpts       stack.CoreOptions
	sessions       adminv1.SessionServiceClient
	turns          adminv1.TurnServiceClient
	gateway        string // host:port of the Runtime gateway
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvSpec(t, &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4})
}

// newEnvSpec is newEnv with a deployment of spec.
func newEnvSpec(t testing.TB, spec *adminv1.Specification) *env {
	t.Helper()
	return newEnvNodes(t, spec, 1)
}

// newEnvNodes is newEnvSpec with n node agents (over the same engine: n
// hosts' worth of agents); env.node is the first, env.nodes all of them.
func newEnvNodes(t testing.TB, spec *adminv1.Specification, n int) *env {
	t.Helper()
	return newEnvWith(t, spec, n, false)
}

// newEnvWith is newEnvNodes; with tls the public URL is https and the
// gateway serves TLS with a certificate from the installation CA (the
// default without --runtime-insecure).
func newEnvWith(t testing.TB, spec *adminv1.Specification, n int, tls bool) *env {
	t.Helper()
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	opts, gw := stack.RuntimeGateway(t, cli)
	if tls {
		opts.PublicURL = "https://" + gw
	}
	e := &env{t: t, docker: cli, dsn: storetest.NewDatabase(t), stateDir: stack.CoreStateDir(t), gateway: gw, coreOpts: opts}
	e.core = stack.StartCoreWith(t, e.dsn, e.stateDir, true, e.coreOpts)
	e.cc, e.ctx = e.core.AdminClient(t)
	e.installationID = stack.InstallationID(t, e.ctx, e.cc)
	nodesAPI := adminv1.NewNodeServiceClient(e.cc)
	for range n {
		tok, err := nodesAPI.CreateEnrollmentToken(e.ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: uuid.NewString(), Ttl: durationpb.New(10 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		listen := stack.FreeAddr(t)
		node := stack.PrepareNode(t, &stack.Installation{ID: e.installationID}, stack.NodeOptions{
			Socket: strings.TrimPrefix(host, "unix://"), Image: image, Listen: listen, Network: "bridge",
		})
		if out, code := stack.EnrollCmd(t, node, e.core.PublicAddr(), tok.GetTokenText(), listen); code != 0 {
			t.Fatalf("enroll: %s", out)
		}
		node.Start()
		t.Cleanup(node.Stop)
		e.nodes = append(e.nodes, node)
	}
	e.node = e.nodes[0]
	for _, name := range stack.EnableAll(t, e.ctx, e.cc) {
		stack.WaitNode(t, e.ctx, nodesAPI, name, stack.Connected)
	}
	stack.CommitDockerDeployment(t, e.ctx, e.cc, spec)
	e.sessions = adminv1.NewSessionServiceClient(e.cc)
	e.turns = adminv1.NewTurnServiceClient(e.cc)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", e.core.Logs())
			e.logContainers()
		}
		// Stopped first (their own cleanups repeat it harmlessly): a Core
		// or agent still running could make more (a capture mid-way)
		// after the removal, which the suite's end would find.
		for _, n := range e.nodes {
			n.Stop()
		}
		e.core.Stop()
		stack.RemoveOwned(t, cli, e.installationID)
	})
	return e
}

// logContainers logs the Runtime containers' output, for a failed test.
func (e *env) logContainers() {
	cs, err := e.docker.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: stack.InstallationFilter(e.installationID)})
	if err != nil {
		return
	}
	for _, c := range cs.Items {
		rc, err := e.docker.ContainerLogs(context.Background(), c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "50"})
		if err != nil {
			continue
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(rc)
		rc.Close()
		e.t.Logf("container %s (%s):\n%s", c.ID[:12], c.State, b.String())
	}
}

// restartCore stops berth-core and starts it again on the same database,
// state and addresses.
func (e *env) restartCore() {
	e.t.Helper()
	e.core.Stop()
	e.core = stack.StartCoreWith(e.t, e.dsn, e.stateDir, true, e.coreOpts)
	e.cc, e.ctx = e.core.AdminClient(e.t)
	e.sessions = adminv1.NewSessionServiceClient(e.cc)
	e.turns = adminv1.NewTurnServiceClient(e.cc)
}

// createSession creates a Session and waits until its Runtime accepts
// Turns.
func (e *env) createSession() string {
	e.t.Helper()
	resp, err := e.sessions.CreateSession(e.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		e.t.Fatalf("CreateSession: %v", err)
	}
	name := resp.GetSession().GetName()
	e.waitAdmitted(name)
	return name
}

func (e *env) waitAdmitted(name string) *adminv1.Session {
	e.t.Helper()
	var s *adminv1.Session
	stack.WaitFor(e.t, 2*time.Minute, "execution admitted for "+name, func() bool {
		resp, err := e.sessions.GetSession(e.ctx, &adminv1.GetSessionRequest{Name: name})
		if err != nil {
			e.t.Fatal(err)
		}
		s = resp.GetSession()
		return s.GetEnvironment().GetExecutionAdmitted()
	})
	return s
}

// result is a finished Turn with its output.
type result struct {
	turn           *adminv1.Turn
	stdout, stderr []byte
}

// run submits a Turn, streams its output and returns it once terminal.
func (e *env) run(session string, t *adminv1.Turn) result {
	e.t.Helper()
	return e.wait(e.submit(session, t))
}

// submit submits a Turn to session and returns its name.
func (e *env) submit(session string, t *adminv1.Turn) string {
	e.t.Helper()
	sub, err := e.turns.SubmitTurn(e.ctx, &adminv1.SubmitTurnRequest{Parent: session, RequestId: uuid.NewString(), Turn: t})
	if err != nil {
		e.t.Fatalf("SubmitTurn: %v", err)
	}
	return sub.GetTurn().GetName()
}

// startLongTurn submits a Turn that prints and then sleeps a minute, and
// returns its name once it runs, for the tests that end it early.
func (e *env) startLongTurn(session string) string {
	e.t.Helper()
	name := e.submit(session, shell("echo go; sleep 60"))
	stack.WaitFor(e.t, time.Minute, "turn running", func() bool {
		g, err := e.turns.GetTurn(e.ctx, &adminv1.GetTurnRequest{Name: name})
		if err != nil {
			e.t.Fatal(err)
		}
		return g.GetTurn().GetState() == adminv1.Turn_STATE_RUNNING && g.GetTurn().GetStdoutBytes() >= 0 && g.GetTurn().GetStartTime() != nil
	})
	return name
}

// wait streams a Turn's output to its end and reads the outcome.
func (e *env) wait(name string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	st, err := e.turns.StreamTurnOutput(ctx, &adminv1.StreamTurnOutputRequest{Name: name})
	if err != nil {
		e.t.Fatalf("StreamTurnOutput: %v", err)
	}
	var r result
	for {
		m, err := st.Recv()
		if err != nil {
			if err.Error() != "EOF" && !strings.Contains(err.Error(), "EOF") {
				e.t.Fatalf("stream: %v", err)
			}
			break
		}
		want := int64(len(r.stdout))
		if m.GetStream() == adminv1.OutputStream_OUTPUT_STREAM_STDERR {
			want = int64(len(r.stderr))
		}
		if m.GetOffset() != want {
			e.t.Fatalf("chunk at offset %d, want %d", m.GetOffset(), want)
		}
		if m.GetStream() == adminv1.OutputStream_OUTPUT_STREAM_STDERR {
			r.stderr = append(r.stderr, m.GetData()...)
		} else {
			r.stdout = append(r.stdout, m.GetData()...)
		}
	}
	got, err := e.turns.GetTurn(e.ctx, &adminv1.GetTurnRequest{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	r.turn = got.GetTurn()
	return r
}

func shell(script string) *adminv1.Turn {
	return &adminv1.Turn{Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: script}}}
}

func (r result) String() string {
	return fmt.Sprintf("state=%v exit=%d failure=%q stdout=%q stderr=%q", r.turn.GetState(), r.turn.GetExitCode(),
		r.turn.GetFailureCode(), r.stdout, r.stderr)
}
