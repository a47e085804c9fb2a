package nodeproto

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store"
	"berth.dev/test/internal/stack"
)

// TestAllocationCallsCarryTheirGeneration: Core's calls about an
// allocation carry the allocation's committed generation, not the one the
// node serves. A node restarted for another generation is connected but
// not ready (generation_mismatch), and its generation fence refuses the
// Kill of the deleted Session's allocation: the container stays in the
// engine and the cleanup stays unknown. Back on the allocation's
// generation, the cleanup completes.
func TestAllocationCallsCarryTheirGeneration(t *testing.T) {
	cl := stack.OneNodeCluster(t, &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: 2, MaxRetained: 2},
		stack.CoreOptions{}, stack.NodeOptions{})
	c, cc, ctx, inst, cli, n, name := cl.Core, cl.CC, cl.Ctx, cl.Installation, cl.Engine, cl.Node, cl.NodeName
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool { return stack.Connected(n) && n.GetReadiness().GetReady() })
	st := c.Store(t)

	sessionsAPI := adminv1.NewSessionServiceClient(cc)
	resp, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: "bound"}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	session := resp.GetSession().GetName()
	sessionID := uuid.MustParse(strings.TrimPrefix(session, "sessions/"))
	// allocation reads the Session's one allocation from the database.
	allocation := func() store.Allocation {
		t.Helper()
		page, err := st.ListAllocationsByAge(context.Background(), store.MaxPageSize, store.AgeCursor{}, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page {
			if a.SessionID == sessionID {
				return a.Allocation
			}
		}
		return store.Allocation{}
	}
	stack.WaitFor(t, 90*time.Second, "the allocation running with settled creation", func() bool {
		a := allocation()
		containers, _ := stack.Owned(t, cli, inst)
		return a.CreationSettled() && a.State != store.AllocationCreateFailed && containers == 1
	})
	if g := allocation().Generation; g != 1 {
		t.Fatalf("allocation of generation %d, want 1", g)
	}

	// The node comes back serving generation 2.
	n.Stop()
	n.EditConfig(func(cfg map[string]any) { cfg["generation"].(map[string]any)["number"] = 2 })
	n.Start()
	stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetDiagnosticCode() == "generation_mismatch"
	})
	if _, err := sessionsAPI.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: session}); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	// Core's Kill, for generation 1, reaches the node and is refused by
	// its fence: the cleanup is recorded unknown and the engine still
	// holds the container.
	stack.WaitFor(t, 60*time.Second, "the refused cleanup recorded unknown", func() bool {
		a := allocation()
		if containers, _ := stack.Owned(t, cli, inst); containers != 1 || a.State == store.AllocationCleanupConfirmed || a.State == store.AllocationReleased {
			t.Fatalf("a node serving generation 2 acted on a generation 1 allocation: %d containers, allocation %s", containers, a.State)
		}
		return a.State == store.AllocationCleanupUnknown
	})
	time.Sleep(2 * time.Second) // more passes, each refused
	if containers, _ := stack.Owned(t, cli, inst); containers != 1 || allocation().State == store.AllocationReleased {
		t.Fatalf("a node serving generation 2 acted on a generation 1 allocation: %d containers, allocation %s", containers, allocation().State)
	}

	// Back on generation 1 the node is ready and the cleanup completes.
	n.Stop()
	n.EditConfig(func(cfg map[string]any) { cfg["generation"].(map[string]any)["number"] = 1 })
	n.Start()
	stack.WaitFor(t, 90*time.Second, "the allocation released and the engine empty", func() bool {
		containers, volumes := stack.Owned(t, cli, inst)
		return allocation().State == store.AllocationReleased && containers+volumes == 0
	})
}
