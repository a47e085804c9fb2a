package nodeproto

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store"
	"berth.dev/test/internal/stack"
)

// TestCorePublishesGenerations: a node serves what Core publishes. After
// the first commit the node serves generation 1 and is ready; a node
// agent restarted serves nothing until Core publishes again, which Core
// does on the new connection before any call, so the running Session's
// allocation (of generation 1) stays observed and its cleanup completes.
// A configuration file that still carries a generation block (written
// for a node agent that read its generation from it) is refused at start,
// naming the block: a stale generation is never served.
func TestCorePublishesGenerations(t *testing.T) {
	cl := stack.OneNodeCluster(t, &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: 2, MaxRetained: 2},
		stack.CoreOptions{}, stack.NodeOptions{})
	c, cc, ctx, inst, cli, n, name := cl.Core, cl.CC, cl.Ctx, cl.Installation, cl.Engine, cl.Node, cl.NodeName
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == 1
	})
	if fi, err := os.Stat(filepath.Join(n.Dir, "state", "generations", "1")); err != nil || !fi.IsDir() {
		t.Fatalf("generation 1's state directory: %v", err)
	}
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

	// A configuration file with a generation block is refused at start.
	n.Stop()
	data, err := os.ReadFile(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(n.Dir, "stale.json")
	if err := os.WriteFile(stale, append(bytes.TrimSuffix(bytes.TrimSpace(data), []byte("}")), []byte(`,"generation":{"number":1}}`)...), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(stack.NodeAgentBin(), "serve", "--config", stale).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "config.generation") {
		t.Fatalf("a configuration with a generation block: %v\n%s", err, out)
	}

	// Restarted, the node serves nothing until Core publishes generation 1
	// again; then it is ready and the cleanup of the deleted Session
	// reaches the allocation's generation.
	n.Start()
	stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == 1
	})
	if _, err := sessionsAPI.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: session}); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	stack.WaitFor(t, 90*time.Second, "the allocation released and the engine empty", func() bool {
		containers, volumes := stack.Owned(t, cli, inst)
		return allocation().State == store.AllocationReleased && containers+volumes == 0
	})
}
