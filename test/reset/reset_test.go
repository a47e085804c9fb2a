package reset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// deadlineTimeout is the second case's reset deadline: Core runs with
// --reset-min-timeout at it (production's minimum is 5 minutes).
const deadlineTimeout = 20 * time.Second

// env is one installation: berth-core with its Runtime gateway on the
// engine's bridge, two enrolled node agents, and a committed Docker
// deployment.
type env struct {
	t      *testing.T
	core   *stack.Core
	nodes  map[string]*stack.Node // by node name ("nodes/{id}")
	cc     *grpc.ClientConn
	admin  context.Context
	engine *client.Client
	inst   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	engine, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	opts, _ := stack.RuntimeGateway(t, engine)
	opts.Args = append(opts.Args, "--reset-min-timeout", deadlineTimeout.String())
	e := &env{t: t, engine: engine, nodes: map[string]*stack.Node{}}
	e.core = stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true, opts)
	e.cc, e.admin = e.core.AdminClient(t)
	e.inst = stack.InstallationID(t, e.admin, e.cc)
	byAddr := map[string]*stack.Node{}
	for range 2 {
		listen := stack.FreeAddr(t)
		n := stack.PrepareNode(t, &stack.Installation{ID: e.inst}, stack.NodeOptions{
			Socket: strings.TrimPrefix(host, "unix://"), Image: image, Listen: listen, Network: "bridge",
		})
		if out, code := stack.EnrollCmd(t, n, e.core.PublicAddr(), stack.CreateEnrollmentToken(t, e.admin, e.cc), listen); code != 0 {
			t.Fatalf("enroll: %s", out)
		}
		n.Start()
		byAddr[listen] = n
	}
	for _, name := range stack.EnableAll(t, e.admin, e.cc) {
		got, err := e.nodesAPI().GetNode(e.admin, &adminv1.GetNodeRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		e.nodes[name] = byAddr[got.GetNode().GetAdvertiseAddress()]
	}
	if len(e.nodes) != 2 || e.nodes[""] != nil {
		t.Fatalf("nodes by name: %v", e.nodes)
	}
	stack.CommitDockerDeployment(t, e.admin, e.cc, spec())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", e.core.Logs())
		}
		for _, n := range e.nodes {
			_ = n.Cmd.Process.Signal(syscall.SIGCONT)
			n.Stop()
		}
		e.core.Stop()
		stack.RemoveOwned(t, engine, e.inst)
	})
	return e
}

func spec() *adminv1.Specification {
	return &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4}
}

func (e *env) nodesAPI() adminv1.NodeServiceClient    { return adminv1.NewNodeServiceClient(e.cc) }
func (e *env) sessions() adminv1.SessionServiceClient { return adminv1.NewSessionServiceClient(e.cc) }
func (e *env) deployments() adminv1.DeploymentServiceClient {
	return adminv1.NewDeploymentServiceClient(e.cc)
}

// placed creates Sessions until each node holds at least one (at most
// eight), waits until each admits execution, and returns them by node.
func (e *env) placed() map[string][]string {
	e.t.Helper()
	byNode := map[string][]string{}
	for i := 0; len(byNode) < 2; i++ {
		if i == 8 {
			e.t.Fatalf("eight Sessions landed on one node: %v", byNode)
		}
		resp, err := e.sessions().CreateSession(e.admin, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: fmt.Sprint("reset-", i)}})
		if err != nil {
			e.t.Fatalf("CreateSession: %v", err)
		}
		name := resp.GetSession().GetName()
		e.waitAdmitted(name)
		a := e.allocation(name)
		byNode[a.GetNode()] = append(byNode[a.GetNode()], name)
	}
	return byNode
}

func (e *env) waitAdmitted(name string) {
	e.t.Helper()
	stack.WaitFor(e.t, 2*time.Minute, "execution admitted for "+name, func() bool {
		resp, err := e.sessions().GetSession(e.admin, &adminv1.GetSessionRequest{Name: name})
		if err != nil {
			e.t.Fatal(err)
		}
		return resp.GetSession().GetEnvironment().GetExecutionAdmitted()
	})
}

// allocation is Session name's allocation, as the administrator lists it.
func (e *env) allocation(name string) *adminv1.Allocation {
	e.t.Helper()
	list, err := adminv1.NewAllocationServiceClient(e.cc).ListAllocations(e.admin, &adminv1.ListAllocationsRequest{PageSize: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, a := range list.GetAllocations() {
		if a.GetSession() == name {
			return a
		}
	}
	e.t.Fatalf("no allocation of %s", name)
	return nil
}

// containers counts the engine's containers of allocation a (its label),
// whatever their state.
func (e *env) containers(a *adminv1.Allocation) int {
	e.t.Helper()
	id := strings.TrimPrefix(a.GetName(), "allocations/")
	list, err := e.engine.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: client.Filters{}.Add("label", docker.LabelAllocation+"="+id),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(list.Items)
}

// running submits a Turn that runs until cancelled.
func (e *env) running(session string) string {
	e.t.Helper()
	turn, err := adminv1.NewTurnServiceClient(e.cc).SubmitTurn(e.admin, &adminv1.SubmitTurnRequest{
		Parent: session, RequestId: uuid.NewString(), Turn: &adminv1.Turn{
			Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: "echo started; sleep 600"}},
			Timeout: durationpb.New(15 * time.Minute), QueueTimeout: durationpb.New(time.Minute),
		},
	})
	if err != nil {
		e.t.Fatalf("SubmitTurn: %v", err)
	}
	name := turn.GetTurn().GetName()
	stack.WaitFor(e.t, time.Minute, name+" running", func() bool {
		got, err := adminv1.NewTurnServiceClient(e.cc).GetTurn(e.admin, &adminv1.GetTurnRequest{Name: name})
		return err == nil && got.GetTurn().GetState() == adminv1.Turn_STATE_RUNNING
	})
	return name
}

func (e *env) getReset(name string) *adminv1.Reset {
	e.t.Helper()
	got, err := e.deployments().GetReset(e.admin, &adminv1.GetResetRequest{Name: name})
	if err != nil {
		e.t.Fatalf("GetReset: %v", err)
	}
	return got.GetDeploymentReset()
}

// lane is what reset r says node holds, nil when it holds nothing.
func lane(r *adminv1.Reset, node string) *adminv1.ResetLane {
	for _, l := range r.GetWaiting() {
		if l.GetNode() == node {
			return l
		}
	}
	return nil
}

func freeze(n *stack.Node) { _ = n.Cmd.Process.Signal(syscall.SIGSTOP) }

// TestResetWaitsForAnOfflineNode is the "Done when" case; then a
// reset whose deadline passes with a node down fails and reopens
// admission.
func TestResetWaitsForAnOfflineNode(t *testing.T) {
	e := newEnv(t)
	byNode := e.placed()
	var live, offline string
	for node := range byNode {
		if offline == "" {
			offline = node
		} else {
			live = node
		}
	}
	var sessions, turns []string
	for _, names := range byNode {
		sessions = append(sessions, names...)
		turns = append(turns, e.running(names[0]))
	}
	offAlloc := e.allocation(byNode[offline][0])
	if e.containers(offAlloc) == 0 {
		t.Fatalf("no container of %s on the engine before the reset", offAlloc.GetName())
	}

	// The offline node's agent freezes, so it cannot clean up; it is still
	// present when the reset starts, and goes offline mid-reset by the
	// presence rule (its connection or its 45 s of health reports).
	freeze(e.nodes[offline])
	frozen := time.Now()
	started, err := e.deployments().StartReset(e.admin, &adminv1.StartResetRequest{RequestId: uuid.NewString()})
	if err != nil {
		t.Fatalf("StartReset: %v", err)
	}
	r := started.GetDeploymentReset()
	if l := lane(r, offline); l == nil || !l.GetPresent() {
		t.Fatalf("at the start the frozen node should hold and be present: %v", r)
	}
	if r.GetGeneration() != 1 || r.GetRequestedBy() != "admin" {
		t.Fatalf("started %v", r)
	}
	if _, err := e.sessions().CreateSession(e.admin, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}}); stack.AdminReason(err) != "deployment_resetting" {
		t.Fatalf("CreateSession during the reset: %v", err)
	}

	// The live node cleans up; the frozen one goes offline and its
	// resources stay held.
	stack.WaitFor(t, 3*time.Minute, "the live node clean and the frozen one offline", func() bool {
		r = e.getReset(r.GetName())
		l := lane(r, offline)
		return r.GetPhase() == adminv1.Reset_PHASE_DRAINING && lane(r, live) == nil && l != nil && !l.GetPresent() &&
			r.GetHeld() == l.GetHeld() && r.GetHeldOffline() == r.GetHeld()
	})
	if r.GetSessionsArchived() != int64(len(sessions)) {
		t.Fatalf("archived %d Sessions, want %d", r.GetSessionsArchived(), len(sessions))
	}
	for _, turn := range turns {
		got, err := adminv1.NewTurnServiceClient(e.cc).GetTurn(e.admin, &adminv1.GetTurnRequest{Name: turn})
		if err != nil || got.GetTurn().GetState() != adminv1.Turn_STATE_CANCELLED {
			t.Fatalf("%s after the archive: %v, %v (the Runtimes honour the archive's cancellation)", turn, got.GetTurn().GetState(), err)
		}
	}
	// Offline ownership holds: past the 45 s presence window (from the
	// freeze, with a margin, and at least 10 s after the node was seen
	// offline) nothing is released and the container is still on the
	// engine.
	time.Sleep(max(10*time.Second, time.Until(frozen.Add(50*time.Second))))
	if r = e.getReset(r.GetName()); r.GetPhase() != adminv1.Reset_PHASE_DRAINING || r.GetHeldOffline() == 0 {
		t.Fatalf("with the node offline the reset moved on: %v", r)
	}
	if e.containers(offAlloc) == 0 {
		t.Fatalf("the offline node's container is gone from the engine while its agent is down")
	}

	// The agent returns and cleans up; the reset completes.
	e.nodes[offline].Kill()
	e.nodes[offline].Start()
	stack.WaitFor(t, 3*time.Minute, "the reset done", func() bool {
		r = e.getReset(r.GetName())
		if r.GetPhase() == adminv1.Reset_PHASE_FAILED {
			t.Fatalf("reset failed: %v", r)
		}
		return r.GetPhase() == adminv1.Reset_PHASE_DONE
	})
	if c, v := stack.Owned(t, e.engine, e.inst); c != 0 || v != 0 {
		t.Fatalf("after the reset the engine holds %d containers and %d volumes of the installation", c, v)
	}
	for _, s := range sessions {
		got, err := e.sessions().GetSession(e.admin, &adminv1.GetSessionRequest{Name: s})
		if err != nil || got.GetSession().GetState() != adminv1.Session_STATE_ARCHIVED {
			t.Fatalf("%s after the reset: %v, %v", s, got.GetSession().GetState(), err)
		}
	}
	d, err := e.deployments().GetDeployment(e.admin, &adminv1.GetDeploymentRequest{Name: "deployment"})
	if err != nil {
		t.Fatal(err)
	}
	empty := r.GetEmptyGeneration()
	if empty < 2 || d.GetDeployment().GetGeneration() != empty || d.GetDeployment().GetProviderKind() != "" {
		t.Fatalf("deployment after the reset %v (empty generation %d)", d.GetDeployment(), empty)
	}
	for name := range e.nodes {
		n, err := e.nodesAPI().GetNode(e.admin, &adminv1.GetNodeRequest{Name: name})
		if err != nil || n.GetNode().GetState() != adminv1.Node_STATE_RETIRED {
			t.Fatalf("%s after the reset: %v, %v", name, n.GetNode().GetState(), err)
		}
	}
	e.checkTrail(r, len(sessions))

	// Another deployment above the empty generation serves again.
	committed, err := e.deployments().CommitDeployment(e.admin, &adminv1.CommitDeploymentRequest{
		ExpectedGeneration: empty, Candidate: &adminv1.DeploymentCandidate{ProviderKind: "docker", Specification: spec()},
	})
	if err != nil || committed.GetDeployment().GetGeneration() != empty+1 {
		t.Fatalf("commit after the reset: %v, %v", committed.GetDeployment().GetGeneration(), err)
	}
	for name := range e.nodes {
		if _, err := e.nodesAPI().EnableNode(e.admin, &adminv1.EnableNodeRequest{Name: name}); err != nil {
			t.Fatalf("EnableNode %s: %v", name, err)
		}
	}
	for name := range e.nodes {
		stack.WaitNode(t, e.admin, e.nodesAPI(), name, func(n *adminv1.Node) bool {
			return stack.Connected(n) && n.GetReadiness().GetGeneration() == empty+1 && n.GetReadiness().GetReady()
		})
	}

	// A second reset, its deadline passing with a node down, fails and
	// reopens admission; the committed deployment stays.
	byNode = e.placed()
	freeze(e.nodes[offline])
	second, err := e.deployments().StartReset(e.admin, &adminv1.StartResetRequest{RequestId: uuid.NewString(), Timeout: durationpb.New(deadlineTimeout)})
	if err != nil {
		t.Fatalf("second StartReset: %v", err)
	}
	stack.WaitFor(t, 2*time.Minute, "the second reset failed at its deadline", func() bool {
		r = e.getReset("resets/-")
		return r.GetPhase() == adminv1.Reset_PHASE_FAILED
	})
	if r.GetName() != second.GetDeploymentReset().GetName() || r.GetFailureCode() != "reset_deadline_passed" || r.GetHeldOffline() == 0 {
		t.Fatalf("second reset %v", r)
	}
	if d, err := e.deployments().GetDeployment(e.admin, &adminv1.GetDeploymentRequest{Name: "deployment"}); err != nil ||
		d.GetDeployment().GetGeneration() != empty+1 || d.GetDeployment().GetProviderKind() != "docker" {
		t.Fatalf("deployment after a failed reset: %v, %v", d.GetDeployment(), err)
	}
	created, err := e.sessions().CreateSession(e.admin, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		t.Fatalf("CreateSession after a failed reset: %v", err)
	}
	e.nodes[offline].Kill()
	e.nodes[offline].Start()
	for _, names := range byNode {
		for _, s := range names {
			if _, err := e.sessions().DeleteSession(e.admin, &adminv1.DeleteSessionRequest{Name: s}); err != nil {
				t.Fatalf("DeleteSession %s: %v", s, err)
			}
		}
	}
	if _, err := e.sessions().DeleteSession(e.admin, &adminv1.DeleteSessionRequest{Name: created.GetSession().GetName()}); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	stack.WaitFor(t, 3*time.Minute, "the engine empty of the installation", func() bool {
		c, v := stack.Owned(t, e.engine, e.inst)
		return c == 0 && v == 0
	})
}

// checkTrail: the audit trail shows reset.start, one session.archive per
// Session with the reset as parent and its request id, one node.retire per
// node under reset.finish, and reset.finish, in that order.
func (e *env) checkTrail(r *adminv1.Reset, sessions int) {
	e.t.Helper()
	resetID := strings.TrimPrefix(r.GetName(), "resets/")
	var all []*adminv1.AuditEvent
	for _, prefix := range []string{"reset.", "session.archive", "node.retire"} {
		list, err := adminv1.NewAuditServiceClient(e.cc).ListAuditEvents(e.admin, &adminv1.ListAuditEventsRequest{
			PageSize: 100, ActionPrefix: prefix, EndTime: timestamppb.New(time.Now().Add(time.Hour)),
		})
		if err != nil {
			e.t.Fatalf("ListAuditEvents %s: %v", prefix, err)
		}
		all = append(all, list.GetAuditEvents()...)
	}
	slices.SortFunc(all, func(a, b *adminv1.AuditEvent) int {
		return a.GetOccurTime().AsTime().Compare(b.GetOccurTime().AsTime())
	})
	var actions []string
	var start, finish *adminv1.AuditEvent
	archives, retires := 0, 0
	for _, ev := range all {
		actions = append(actions, ev.GetAction())
		switch ev.GetAction() {
		case "reset.start":
			start = ev
		case "reset.finish":
			finish = ev
		}
	}
	if start == nil || finish == nil || all[0] != start || all[len(all)-1] != finish || finish.GetOutcome() != "ok" ||
		start.GetResource() != r.GetName() || finish.GetParentId() != resetID {
		e.t.Fatalf("reset events in order: %v", actions)
	}
	for _, ev := range all {
		switch ev.GetAction() {
		case "session.archive":
			if ev.GetParentId() != resetID || ev.GetRequestId() != start.GetRequestId() || ev.GetActor() != "admin" {
				e.t.Fatalf("archive event %v", ev)
			}
			archives++
		case "node.retire":
			if ev.GetParentId() != finish.GetId() {
				e.t.Fatalf("node.retire %v not under reset.finish %s", ev, finish.GetId())
			}
			retires++
		}
	}
	if archives != sessions || retires != len(e.nodes) {
		e.t.Fatalf("%d archives (want %d) and %d retirements (want %d): %v", archives, sessions, retires, len(e.nodes), actions)
	}
}
