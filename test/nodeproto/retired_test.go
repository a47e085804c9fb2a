package nodeproto

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// TestRetiredNodeCleansUpAcrossCoreRestart: a node retired while it holds
// running Sessions is never placed on again, but Core keeps its connection
// and its lifecycle worker, also after a Core restart (SIGKILL): the
// Sessions deleted through the new Core end with nothing of theirs on the
// engine (counted from the engine) and every allocation released, and then
// the node can be removed.
func TestRetiredNodeCleansUpAcrossCoreRestart(t *testing.T) {
	cl := stack.OneNodeCluster(t, &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4},
		stack.CoreOptions{}, stack.NodeOptions{})
	c, cc, ctx, installationID, cli, nodeName := cl.Core, cl.CC, cl.Ctx, cl.Installation, cl.Engine, cl.NodeName
	nodesAPI := adminv1.NewNodeServiceClient(cc)

	sessionsAPI := adminv1.NewSessionServiceClient(cc)
	var names []string
	for range 2 {
		resp, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, resp.GetSession().GetName())
	}
	allocations := adminv1.NewAllocationServiceClient(cc)
	stack.WaitFor(t, 2*time.Minute, "both allocations active", func() bool {
		resp, err := allocations.ListAllocations(ctx, &adminv1.ListAllocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		for _, a := range resp.GetAllocations() {
			if a.GetState() == adminv1.Allocation_STATE_ACTIVE {
				active++
			}
		}
		return active == 2
	})
	if containers, volumes := stack.Owned(t, cli, installationID); containers != 2 || volumes != 4 {
		t.Fatalf("engine holds %d containers and %d volumes, want 2 and 4", containers, volumes)
	}

	// Retired: nothing new is placed on it (it is the only node).
	if _, err := nodesAPI.RetireNode(ctx, &adminv1.RetireNodeRequest{Name: nodeName}); err != nil {
		t.Fatal(err)
	}
	if _, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}}); stack.AdminReason(err) != "no_ready_node_with_capacity" {
		t.Fatalf("a Session was placed on a retired node: %v", err)
	}

	// Core dies; the new Core connects to the retired node again.
	c.Kill()
	c2 := stack.StartCore(t, c.DSN, c.StateDir, true)
	cc2, ctx2 := c2.AdminClient(t)
	nodes2 := adminv1.NewNodeServiceClient(cc2)
	stack.WaitNode(t, ctx2, nodes2, nodeName, func(n *adminv1.Node) bool {
		return n.GetState() == adminv1.Node_STATE_RETIRED && n.GetPresence().GetConnected()
	})
	deleteAndWaitEmpty(t, ctx2, cc2, cli, installationID, names...)
	if _, err := nodes2.RemoveNode(ctx2, &adminv1.RemoveNodeRequest{Name: nodeName}); err != nil {
		t.Fatalf("removing the emptied retired node: %v", err)
	}
}

// TestRetirementDrainsTheNodesWorker: retiring a node goes through its
// lifecycle worker's drain gate. The node agent is stopped (SIGSTOP) so a
// Create hangs in flight. When the agent resumes within the five-second
// bound, RetireNode returns only after that Create was recorded: the
// allocation is already active when the answer arrives. When it does not
// resume in time, RetireNode is refused with the fixed owner_failure
// reason, the node stays enabled, the Create in flight is not cancelled
// (it completes once the agent resumes), and Core closes admission:
// CreateSession is refused with owner_failure until Core restarts. After
// a restart the retirement succeeds, and the Session deleted on the
// retired node leaves nothing on the engine.
func TestRetirementDrainsTheNodesWorker(t *testing.T) {
	cl := stack.OneNodeCluster(t, &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4},
		stack.CoreOptions{}, stack.NodeOptions{})
	c, cc, ctx, cli, nodeName := cl.Core, cl.CC, cl.Ctx, cl.Engine, cl.NodeName
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	sessionsAPI := adminv1.NewSessionServiceClient(cc)
	allocations := adminv1.NewAllocationServiceClient(cc)
	agent := cl.Node.Cmd.Process
	signal := func(s syscall.Signal) {
		if err := agent.Signal(s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = agent.Signal(syscall.SIGCONT) })
	allocationOf := func(session string) *adminv1.Allocation {
		resp, err := allocations.ListAllocations(ctx, &adminv1.ListAllocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.GetAllocations() {
			if a.GetSession() == session {
				return a
			}
		}
		t.Fatalf("no allocation of %s", session)
		return nil
	}
	// hungCreate stops the agent and creates a Session whose Create is
	// then in flight (dispatched, unsettled).
	hungCreate := func() string {
		stack.WaitNode(t, ctx, nodesAPI, nodeName, func(n *adminv1.Node) bool {
			return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == 1
		})
		signal(syscall.SIGSTOP)
		resp, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
		if err != nil {
			t.Fatal(err)
		}
		name := resp.GetSession().GetName()
		stack.WaitFor(t, 30*time.Second, "the Create dispatched to the stopped agent", func() bool {
			return allocationOf(name).GetState() == adminv1.Allocation_STATE_CREATING
		})
		return name
	}

	// Within the bound: the retirement waits for the Create.
	first := hungCreate()
	go func() {
		time.Sleep(time.Second)
		_ = agent.Signal(syscall.SIGCONT)
	}()
	if _, err := nodesAPI.RetireNode(ctx, &adminv1.RetireNodeRequest{Name: nodeName}); err != nil {
		t.Fatalf("retire with the agent resumed within the bound: %v", err)
	}
	if got := allocationOf(first).GetState(); got != adminv1.Allocation_STATE_ACTIVE {
		t.Fatalf("when RetireNode answered, the Create in flight was %s, want active (drained before the retirement)", got)
	}
	if _, err := nodesAPI.EnableNode(ctx, &adminv1.EnableNodeRequest{Name: nodeName}); err != nil {
		t.Fatal(err)
	}
	// Nothing else on the node, so the only call in flight next is the
	// Create (no observation of the first Session can hang instead).
	if _, err := sessionsAPI.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: first}); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, time.Minute, "the first Session's allocation released", func() bool {
		resp, err := allocations.ListAllocations(ctx, &adminv1.ListAllocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.GetAllocations()) == 0
	})

	// Past the bound: refused, nothing cancelled, admission closed.
	second := hungCreate()
	_, err := nodesAPI.RetireNode(ctx, &adminv1.RetireNodeRequest{Name: nodeName})
	if stack.AdminReason(err) != "owner_failure" {
		t.Fatalf("retire with the agent stopped past the bound: %v, want owner_failure", err)
	}
	got, err := nodesAPI.GetNode(ctx, &adminv1.GetNodeRequest{Name: nodeName})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetNode().GetState() != adminv1.Node_STATE_ENABLED {
		t.Fatalf("after a failed retirement the node is %s, want enabled", got.GetNode().GetState())
	}
	_, err = sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if stack.AdminReason(err) != "owner_failure" {
		t.Fatalf("CreateSession after the owner failure: %v, want owner_failure", err)
	}
	signal(syscall.SIGCONT)
	stack.WaitFor(t, time.Minute, "the Create in flight to complete (not cancelled)", func() bool {
		return allocationOf(second).GetState() == adminv1.Allocation_STATE_ACTIVE
	})
	// The engine's view: the one Session left has its container running.
	running, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: stack.InstallationFilter(cl.Installation)})
	if err != nil {
		t.Fatal(err)
	}
	if len(running.Items) != 1 {
		t.Fatalf("the engine runs %d containers of the installation, want the one the hung Create made", len(running.Items))
	}
	if !strings.Contains(c.Logs(), "owner failure: admission closed") {
		t.Fatalf("Core did not report the owner failure:\n%s", c.Logs())
	}

	// A restarted Core retires the node; its Sessions are cleaned up.
	c.Stop()
	c2 := stack.StartCore(t, c.DSN, c.StateDir, true)
	cc2, ctx2 := c2.AdminClient(t)
	nodes2 := adminv1.NewNodeServiceClient(cc2)
	stack.WaitNode(t, ctx2, nodes2, nodeName, stack.Connected)
	if _, err := nodes2.RetireNode(ctx2, &adminv1.RetireNodeRequest{Name: nodeName}); err != nil {
		t.Fatalf("retire after the restart: %v", err)
	}
	deleteAndWaitEmpty(t, ctx2, cc2, cli, cl.Installation, second)
}

// deleteAndWaitEmpty deletes the named Sessions through cc and waits
// until Core holds no allocation and the engine (read directly) holds
// nothing of the installation.
func deleteAndWaitEmpty(t *testing.T, ctx context.Context, cc *grpc.ClientConn, cli *client.Client, installationID string, names ...string) {
	t.Helper()
	sessions := adminv1.NewSessionServiceClient(cc)
	for _, name := range names {
		if _, err := sessions.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	allocations := adminv1.NewAllocationServiceClient(cc)
	stack.WaitFor(t, 2*time.Minute, "every allocation released and nothing left on the engine", func() bool {
		resp, err := allocations.ListAllocations(ctx, &adminv1.ListAllocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		containers, volumes := stack.Owned(t, cli, installationID)
		return len(resp.GetAllocations()) == 0 && containers == 0 && volumes == 0
	})
}
