package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// fork forks session into count children and waits until each is
// execution admitted.
func (e *env) fork(session string, count int32) (*adminv1.ForkSessionResponse, []string) {
	e.t.Helper()
	resp, err := e.sessions.ForkSession(e.ctx, &adminv1.ForkSessionRequest{Name: session, RequestId: uuid.NewString(), Count: count})
	if err != nil {
		e.t.Fatalf("ForkSession: %v (reason %q)", err, stack.AdminReason(err))
	}
	var names []string
	for _, c := range resp.GetChildren() {
		names = append(names, c.GetName())
	}
	for _, n := range names {
		e.waitAdmitted(n)
	}
	return resp, names
}

// engineHas reports whether the engine finds path in session's running
// container (its archive endpoint, not the Runtime).
func (e *env) engineHas(session, path string) bool {
	e.t.Helper()
	running, _, _ := e.allocationContainers(e.session(session).GetAllocation())
	if len(running) != 1 {
		e.t.Fatalf("running containers of %s: %v", session, running)
	}
	res, err := e.docker.CopyFromContainer(e.ctx, strings.TrimPrefix(running[0], "/"), client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return false
	}
	res.Content.Close()
	return true
}

// TestForkOfARunningSessionMakesIsolatedChildren is issue 33's fork
// isolation test over the real binaries and engine: a Session with 10 MB
// in its workspace, forked into three while a Turn runs in it. The Turn
// completes; each child becomes ACTIVE on its own allocation and Runtime
// with the workspace byte for byte; a write in one child is absent (read
// through the engine) in its siblings and in the source, and a write in
// the source after the fork in every child. After every deletion the
// engine holds nothing of the installation.
func TestForkOfARunningSessionMakesIsolatedChildren(t *testing.T) {
	e := newEnvSpec(t, &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 8, MaxRetained: 4})
	src := e.createSession()
	sum := strings.Fields(string(e.run(src, shell(workspaceScript)).stdout))[0]
	long := e.submit(src, shell("echo start; sleep 4; echo end"))

	resp, children := e.fork(src, 3)
	if resp.GetRequested() != 3 || resp.GetPlaced() != 3 || resp.GetUnplacedReason() != "" || len(children) != 3 {
		t.Fatalf("ForkSession answered %v", resp)
	}
	if r := e.wait(long); r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "start\nend\n" {
		t.Fatalf("the source's Turn across the fork: %v", r)
	}
	allocations := map[string]bool{e.session(src).GetAllocation(): true}
	for _, c := range children {
		s := e.session(c)
		if s.GetState() != adminv1.Session_STATE_ACTIVE || allocations[s.GetAllocation()] {
			t.Fatalf("child %s: %v", c, s)
		}
		allocations[s.GetAllocation()] = true
		r := e.run(c, shell("sha256sum /workspace/data; id -u"))
		if got := strings.Fields(string(r.stdout)); len(got) != 3 || got[0] != sum || got[2] != "1000" {
			t.Fatalf("child %s's workspace: %v (want sha256 %s)", c, r, sum)
		}
	}

	e.run(children[0], shell("echo mine > /workspace/only-child-0"))
	e.run(src, shell("echo later > /workspace/source-after-fork"))
	if !e.engineHas(children[0], "/workspace/only-child-0") || !e.engineHas(src, "/workspace/source-after-fork") {
		t.Fatal("the engine does not show the writes themselves")
	}
	for _, other := range []string{children[1], children[2], src} {
		if e.engineHas(other, "/workspace/only-child-0") {
			t.Fatalf("%s sees child 0's write", other)
		}
	}
	for _, c := range children {
		if e.engineHas(c, "/workspace/source-after-fork") {
			t.Fatalf("%s sees the source's write after the fork", c)
		}
	}

	for _, s := range append([]string{src}, children...) {
		if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: s}); err != nil {
			t.Fatalf("DeleteSession %s: %v", s, err)
		}
	}
	stack.WaitFor(t, 2*time.Minute, "the engine holds nothing of the installation", func() bool {
		c, v := stack.Owned(t, e.docker, e.installationID)
		return c == 0 && v == 0
	})
}

// TestForkOfASuspendedSession: a suspended Session lends its suspension
// snapshot: its children become ACTIVE with its workspace while it stays
// SUSPENDED (a fork is not a wake).
func TestForkOfASuspendedSession(t *testing.T) {
	e := newEnvSpec(t, suspendingSpec())
	src := e.createSession()
	sum := strings.Fields(string(e.run(src, shell(workspaceScript)).stdout))[0]
	if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: src, RequestId: uuid.NewString()}); err != nil {
		t.Fatalf("SuspendSession: %v", err)
	}
	e.waitPhase(src, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, time.Minute)
	resp, children := e.fork(src, 2)
	if resp.GetPlaced() != 2 {
		t.Fatalf("ForkSession answered %v", resp)
	}
	for _, c := range children {
		r := e.run(c, shell("sha256sum /workspace/data"))
		if got := strings.Fields(string(r.stdout)); len(got) == 0 || got[0] != sum {
			t.Fatalf("child %s's workspace: %v (want sha256 %s)", c, r, sum)
		}
	}
	if p := e.session(src).GetEnvironment().GetComputePhase(); p != adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED {
		t.Fatalf("the source after the fork: %v", p)
	}
}

// TestForkRefusals: a count outside 1..128 is INVALID_ARGUMENT naming the
// field and the bound; an unknown Session NOT_FOUND; a retry with the
// same request id returns the same children.
func TestForkRefusals(t *testing.T) {
	e := newEnvSpec(t, &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4})
	src := e.createSession()
	for _, n := range []int32{0, 129} {
		_, err := e.sessions.ForkSession(e.ctx, &adminv1.ForkSessionRequest{Name: src, RequestId: uuid.NewString(), Count: n})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "count") || !strings.Contains(status.Convert(err).Message(), "128") {
			t.Fatalf("fork of %d = %v", n, err)
		}
	}
	_, err := e.sessions.ForkSession(e.ctx, &adminv1.ForkSessionRequest{Name: "sessions/" + uuid.NewString(), RequestId: uuid.NewString(), Count: 1})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("fork of an unknown session = %v", err)
	}
	// max_active 4 holds the source: three fit; min_count 4 writes nothing.
	_, err = e.sessions.ForkSession(e.ctx, &adminv1.ForkSessionRequest{Name: src, RequestId: uuid.NewString(), Count: 5, MinCount: 4})
	if stack.AdminReason(err) != "no_ready_node_with_capacity" {
		t.Fatalf("fork beyond capacity with min_count 4 = %v", err)
	}
	req := &adminv1.ForkSessionRequest{Name: src, RequestId: uuid.NewString(), Count: 5}
	first, err := e.sessions.ForkSession(e.ctx, req)
	if err != nil || first.GetPlaced() != 3 || first.GetUnplacedReason() != "no_ready_node_with_capacity" {
		t.Fatalf("partial fork = %v, %v", first, err)
	}
	again, err := e.sessions.ForkSession(e.ctx, req)
	if err != nil || again.GetFork() != first.GetFork() || len(again.GetChildren()) != 3 || again.GetChildren()[2].GetName() != first.GetChildren()[2].GetName() {
		t.Fatalf("retry = %v, %v; want %v", again, err, first)
	}
	for _, c := range first.GetChildren() {
		e.waitAdmitted(c.GetName())
	}
	if e.session(src).GetState() != adminv1.Session_STATE_ACTIVE {
		t.Fatal("the source is not active after the fork")
	}
}

// TestForkSpreadsChildrenOverNodes: with two node agents (one engine,
// two hosts' worth of agents) a fork's children are placed on both; those
// on the node without the source are created from that node's seed (the
// snapshot exported by the source's agent and imported by theirs, relayed
// by Core) and hold the workspace byte for byte; after every deletion,
// seeds included, the engine holds nothing of the installation.
func TestForkSpreadsChildrenOverNodes(t *testing.T) {
	e := newEnvNodes(t, &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 8, MaxRetained: 4}, 2)
	src := e.createSession()
	sum := strings.Fields(string(e.run(src, shell(workspaceScript)).stdout))[0]
	sourceNode := e.session(src).GetNode()
	_, children := e.fork(src, 4)
	nodes := map[string]int{}
	for _, c := range children {
		s := e.session(c)
		nodes[s.GetNode()]++
		r := e.run(c, shell("sha256sum /workspace/data"))
		if got := strings.Fields(string(r.stdout)); len(got) == 0 || got[0] != sum {
			t.Fatalf("child %s on %s: %v (want sha256 %s)", c, s.GetNode(), r, sum)
		}
	}
	if len(nodes) != 2 || nodes[sourceNode] == 0 {
		t.Fatalf("children per node %v; want both nodes (the source's is %s)", nodes, sourceNode)
	}
	for _, c := range children {
		if e.session(c).GetNode() != sourceNode {
			e.run(c, shell("echo far > /workspace/far-child"))
			if e.engineHas(src, "/workspace/far-child") {
				t.Fatal("the source sees a write of a child on the other node")
			}
			break
		}
	}
	for _, s := range append([]string{src}, children...) {
		if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: s}); err != nil {
			t.Fatalf("DeleteSession %s: %v", s, err)
		}
	}
	stack.WaitFor(t, 2*time.Minute, "the engine holds nothing of the installation (seeds discarded)", func() bool {
		c, v := stack.Owned(t, e.docker, e.installationID)
		return c == 0 && v == 0
	})
}
