package nodeproto

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// TestTwentySessionsOnTwoNodes is issue #5's walk-through with the real
// binaries and the real engine: berth-core, two enrolled berth-nodeagent
// processes, a committed deployment; 20 Sessions are placed across both
// nodes within capacity, their containers run, and after deleting them no
// container or volume labelled with the installation remains.
func TestTwentySessionsOnTwoNodes(t *testing.T) {
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	c := stack.StartCore(t, storetestDatabase(t), stack.CoreStateDir(t), true)
	cc, ctx := c.AdminClient(t)
	inst, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
	if err != nil {
		t.Fatal(err)
	}
	installationID := inst.GetInstallation().GetId()
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	public := c.PublicAddr()

	spec := &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: 10, MaxRetained: 10}
	// Two nodes over the same engine (two hosts' worth of agents).
	var nodeNames []string
	for range 2 {
		tok, err := nodesAPI.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: uuid.NewString(), Ttl: durationpb.New(10 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		listen := stack.FreeAddr(t)
		n := stack.PrepareNode(t, &stack.Installation{ID: installationID}, stack.NodeOptions{Socket: strings.TrimPrefix(host, "unix://"), Image: image, Listen: listen, Specification: spec})
		if out, code := stack.EnrollCmd(t, n, public, tok.GetTokenText(), listen); code != 0 {
			t.Fatalf("enroll: %s", out)
		}
		n.Start()
		t.Cleanup(n.Stop)
	}
	list, err := nodesAPI.ListNodes(ctx, &adminv1.ListNodesRequest{})
	if err != nil || len(list.GetNodes()) != 2 {
		t.Fatalf("nodes: %v %v", list, err)
	}
	for _, n := range list.GetNodes() {
		nodeNames = append(nodeNames, n.GetName())
		if _, err := nodesAPI.EnableNode(ctx, &adminv1.EnableNodeRequest{Name: n.GetName()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range nodeNames {
		stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool { return n.GetPresence().GetConnected() })
	}
	deploy := adminv1.NewDeploymentServiceClient(cc)
	if _, err := deploy.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind:  "docker",
		Specification: spec,
	}}); err != nil {
		t.Fatalf("CommitDeployment: %v", err)
	}
	stack.WaitPublished(t, ctx, cc, 1)

	sessionsAPI := adminv1.NewSessionServiceClient(cc)
	var sessionNames []string
	for i := range 20 {
		resp, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{
			RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: "s" + strings.Repeat("x", i%3)},
		})
		if err != nil {
			t.Fatalf("CreateSession %d: %v", i, err)
		}
		sessionNames = append(sessionNames, resp.GetSession().GetName())
	}
	// A 21st does not fit (2 nodes x max_active 10).
	_, err = sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if status.Code(err) != codes.FailedPrecondition || stack.AdminReason(err) != "no_ready_node_with_capacity" {
		t.Fatalf("a Session beyond capacity: %v, want FAILED_PRECONDITION no_ready_node_with_capacity", err)
	}
	// GetNode explains it node by node: each holds its max_active.
	for _, name := range nodeNames {
		got, err := nodesAPI.GetNode(ctx, &adminv1.GetNodeRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if c := got.GetNode().GetCapacity(); c.GetActive() != 10 || c.GetMaxActive() != 10 || c.GetMaxRetained() != 10 ||
			c.GetRetained() != 0 || c.GetNoRoomReason() != "max_active" {
			t.Fatalf("capacity of a full node: %v", c)
		}
	}
	listed, err := sessionsAPI.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 100})
	if err != nil || len(listed.GetSessions()) != 20 {
		t.Fatalf("ListSessions: %d, %v", len(listed.GetSessions()), err)
	}

	allocations := adminv1.NewAllocationServiceClient(cc)
	perNode := map[string]int{}
	stack.WaitFor(t, 3*time.Minute, "every allocation active", func() bool {
		resp, err := allocations.ListAllocations(ctx, &adminv1.ListAllocationsRequest{PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		clear(perNode)
		for _, a := range resp.GetAllocations() {
			if a.GetState() == adminv1.Allocation_STATE_ACTIVE && a.GetCreateSettled() {
				active++
			}
			perNode[a.GetNode()]++
		}
		return active == 20
	})
	for _, name := range nodeNames {
		if perNode[name] == 0 || perNode[name] > 10 {
			t.Fatalf("placement across nodes: %v", perNode)
		}
	}
	cli, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	owned := func() (int, int) {
		f := client.Filters{}.Add("label", docker.LabelInstallation+"="+installationID)
		cs, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		vs, err := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs.Items), len(vs.Items)
	}
	if containers, volumes := owned(); containers != 20 || volumes != 40 {
		t.Fatalf("engine holds %d containers and %d volumes, want 20 and 40", containers, volumes)
	}

	// A node that holds allocations cannot be removed, even retired.
	if _, err := nodesAPI.RetireNode(ctx, &adminv1.RetireNodeRequest{Name: nodeNames[0]}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodesAPI.RemoveNode(ctx, &adminv1.RemoveNodeRequest{Name: nodeNames[0]}); status.Code(err) != codes.FailedPrecondition ||
		stack.AdminReason(err) != "node_holds_allocations" {
		t.Fatalf("removing a node that holds allocations: %v", err)
	}
	// The retired node stays connected and observed (never placed on):
	// its Sessions' deletions complete without enabling it again.
	stack.WaitNode(t, ctx, nodesAPI, nodeNames[0], func(n *adminv1.Node) bool {
		return n.GetState() == adminv1.Node_STATE_RETIRED && n.GetPresence().GetConnected()
	})

	for _, name := range sessionNames {
		if _, err := sessionsAPI.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	}
	stack.WaitFor(t, 3*time.Minute, "every allocation released and nothing left on the engine", func() bool {
		resp, err := allocations.ListAllocations(ctx, &adminv1.ListAllocationsRequest{PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		containers, volumes := owned()
		return len(resp.GetAllocations()) == 0 && containers == 0 && volumes == 0
	})
	// Empty now: removing the retired node succeeds.
	if _, err := nodesAPI.RemoveNode(ctx, &adminv1.RemoveNodeRequest{Name: nodeNames[0]}); err != nil {
		t.Fatalf("removing an empty retired node: %v", err)
	}
}
