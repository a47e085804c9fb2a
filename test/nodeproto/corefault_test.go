package nodeproto

import (
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker/dockertest"

	"berth.dev/test/internal/stack"
)

// TestCoreKilledDuringCreate kills berth-core (SIGKILL) right after the
// engine performed a Session's container create. The node agent runs the
// started Create to its end anyway; the restarted Core observes the
// allocation running and settled, never creates it again, and deleting the
// Session removes the resources and releases the allocation.
func TestCoreKilledDuringCreate(t *testing.T) {
	dsn := storetestDatabase(t)
	state := stack.CoreStateDir(t)
	c := stack.StartCore(t, dsn, state, true)
	cc, ctx := c.AdminClient(t)
	inst, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
	if err != nil {
		t.Fatal(err)
	}
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	tok, err := nodesAPI.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: uuid.NewString(), Ttl: durationpb.New(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	engine := stack.FixtureEngine(t)
	listen := stack.FreeAddr(t)
	spec := &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4}
	n := stack.PrepareNode(t, &stack.Installation{ID: inst.GetInstallation().GetId()}, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage, Listen: listen, Specification: spec})
	public := c.PublicAddr()
	if out, code := stack.EnrollCmd(t, n, public, tok.GetTokenText(), listen); code != 0 {
		t.Fatalf("enroll: %s", out)
	}
	n.Start()
	t.Cleanup(n.Stop)
	nodes, err := nodesAPI.ListNodes(ctx, &adminv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	nodeName := nodes.GetNodes()[0].GetName()
	if _, err := nodesAPI.EnableNode(ctx, &adminv1.EnableNodeRequest{Name: nodeName}); err != nil {
		t.Fatal(err)
	}
	stack.WaitNode(t, ctx, nodesAPI, nodeName, func(n *adminv1.Node) bool { return n.GetPresence().GetConnected() })
	if _, err := adminv1.NewDeploymentServiceClient(cc).CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind:  "docker",
		Specification: spec,
	}}); err != nil {
		t.Fatal(err)
	}
	stack.WaitPublished(t, ctx, cc, 1)

	engine.ResetCalls()
	engine.Arm(dockertest.CallContainerCreate, dockertest.FaultHookAfterDispatch, func() {
		_ = c.Cmd.Process.Signal(syscall.SIGKILL)
	})
	session, err := adminv1.NewSessionServiceClient(cc).CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the worker never dispatched the Create")
	}

	c2 := stack.StartCore(t, dsn, state, true)
	cc2, ctx2 := c2.AdminClient(t)
	allocations := adminv1.NewAllocationServiceClient(cc2)
	stack.WaitNode(t, ctx2, adminv1.NewNodeServiceClient(cc2), nodeName, func(n *adminv1.Node) bool { return n.GetPresence().GetConnected() })
	// Several passes of the restarted Core's worker.
	time.Sleep(3 * time.Second)
	if got := count(adapterCalls(engine), dockertest.CallContainerCreate); got != 1 {
		t.Fatalf("container create sent %d times across the Core restart: %v", got, adapterCalls(engine))
	}
	resp, err := allocations.ListAllocations(ctx2, &adminv1.ListAllocationsRequest{})
	if err != nil || len(resp.GetAllocations()) != 1 {
		t.Fatalf("allocations: %v %v", resp, err)
	}
	// The node agent ran the Create to its end although Core vanished, so
	// the restarted Core observes it running and settled.
	if a := resp.GetAllocations()[0]; a.GetState() != adminv1.Allocation_STATE_ACTIVE || !a.GetCreateSettled() {
		t.Fatalf("the Create Core was killed during: %v, want ACTIVE and settled", a)
	}

	if _, err := adminv1.NewSessionServiceClient(cc2).DeleteSession(ctx2, &adminv1.DeleteSessionRequest{Name: session.GetSession().GetName()}); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, 60*time.Second, "the interrupted allocation's stack.Resources removed", func() bool {
		return len(engine.Containers()) == 0 && len(engine.Volumes()) == 0
	})
	time.Sleep(2 * time.Second)
	resp, err = allocations.ListAllocations(ctx2, &adminv1.ListAllocationsRequest{})
	if err != nil || len(resp.GetAllocations()) != 0 {
		t.Fatalf("the settled, cleaned-up allocation is not released: %v %v", resp, err)
	}
	if got := count(adapterCalls(engine), dockertest.CallContainerCreate); got != 1 {
		t.Fatalf("container create sent %d times", got)
	}
}
