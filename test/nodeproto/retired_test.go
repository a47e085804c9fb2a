package nodeproto

import (
	"testing"
	"time"

	"github.com/google/uuid"

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
	sessions2 := adminv1.NewSessionServiceClient(cc2)
	for _, name := range names {
		if _, err := sessions2.DeleteSession(ctx2, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	allocations2 := adminv1.NewAllocationServiceClient(cc2)
	stack.WaitFor(t, 2*time.Minute, "every allocation released and nothing left on the engine", func() bool {
		resp, err := allocations2.ListAllocations(ctx2, &adminv1.ListAllocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		containers, volumes := stack.Owned(t, cli, installationID)
		return len(resp.GetAllocations()) == 0 && containers == 0 && volumes == 0
	})
	if _, err := nodes2.RemoveNode(ctx2, &adminv1.RemoveNodeRequest{Name: nodeName}); err != nil {
		t.Fatalf("removing the emptied retired node: %v", err)
	}
}
