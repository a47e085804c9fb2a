package nodeproto

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// TestRetiredNodeCleansUpAcrossCoreRestart: a node retired while it holds
// running Sessions is never placed on again, but Core keeps its connection
// and its lifecycle worker, also after a Core restart (SIGKILL): the
// Sessions deleted through the new Core end with nothing of theirs on the
// engine (counted from the engine) and every allocation released, and then
// the node can be removed.
func TestRetiredNodeCleansUpAcrossCoreRestart(t *testing.T) {
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	dsn := storetestDatabase(t)
	state := stack.CoreStateDir(t)
	c := stack.StartCore(t, dsn, state, true)
	cc, ctx := c.AdminClient(t)
	installationID := stack.InstallationID(t, ctx, cc)
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	tok, err := nodesAPI.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: uuid.NewString(), Ttl: durationpb.New(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	listen := stack.FreeAddr(t)
	spec := &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4}
	n := stack.PrepareNode(t, &stack.Installation{ID: installationID}, stack.NodeOptions{Socket: strings.TrimPrefix(host, "unix://"), Image: image, Listen: listen, Specification: spec})
	if out, code := stack.EnrollCmd(t, n, c.PublicAddr(), tok.GetTokenText(), listen); code != 0 {
		t.Fatalf("enroll: %s", out)
	}
	n.Start()
	t.Cleanup(n.Stop)
	nodeName := stack.EnableAll(t, ctx, cc)[0]
	stack.WaitNode(t, ctx, nodesAPI, nodeName, stack.Connected)
	stack.CommitDockerDeployment(t, ctx, cc, spec)

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
	cli, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
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
	c2 := stack.StartCore(t, dsn, state, true)
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
