package microsandbox

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// TestReplaceDockerWithMicrosandbox: a fleet serving a Docker deployment
// (a node agent on the Docker API fixture) is replaced with a
// microsandbox one by ReplaceDeployment naming provider_kind and turning
// suspension off (the Docker deployment inherited Docker's suspension
// defaults, which microsandbox, without checkpoints, refuses). The
// Docker node is retired in the same commit and serves no new generation;
// a microsandbox node (the real msb) enrolled and enabled afterwards serves
// the new generation: connected, bound to its msb home, and not ready
// with the host's diagnostic (hardware_virtualization_unavailable here).
func TestReplaceDockerWithMicrosandbox(t *testing.T) {
	msb := testenv.MSB(t)
	want := expectedDiagnostic(t)
	core := stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true, stack.CoreOptions{})
	cc, ctx := core.AdminClient(t)
	installation := stack.InstallationID(t, ctx, cc)
	logOnFailure(t, core)
	nodes := adminv1.NewNodeServiceClient(cc)
	deployments := adminv1.NewDeploymentServiceClient(cc)

	engine := stack.FixtureEngine(t)
	stack.EnrollAndStart(t, core, ctx, cc, installation, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage}, "")
	dockerNode := stack.EnableAll(t, ctx, cc)[0]
	stack.CommitDockerDeployment(t, ctx, cc, stack.DefaultSpecification())
	stack.WaitNode(t, ctx, nodes, dockerNode, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == 1
	})

	resp, err := deployments.ReplaceDeployment(ctx, &adminv1.ReplaceDeploymentRequest{
		Candidate: &adminv1.DeploymentCandidate{ProviderKind: "microsandbox", Specification: &adminv1.Specification{
			Suspension: &adminv1.SuspensionPolicy{Disabled: true},
		}},
		UpdateMask:         &fieldmaskpb.FieldMask{Paths: []string{"provider_kind", "specification.suspension"}},
		ExpectedGeneration: 1,
	})
	if err != nil {
		t.Fatalf("ReplaceDeployment to microsandbox: %v", err)
	}
	d := resp.GetDeployment()
	if d.GetGeneration() != 2 || d.GetProviderKind() != "microsandbox" || !resp.GetChanged() ||
		d.GetSpecification().GetMemoryBytes() != stack.DefaultSpecification().GetMemoryBytes() {
		t.Fatalf("ReplaceDeployment: generation %d, kind %q, changed %v, specification %v",
			d.GetGeneration(), d.GetProviderKind(), resp.GetChanged(), d.GetSpecification())
	}
	got, err := nodes.GetNode(ctx, &adminv1.GetNodeRequest{Name: dockerNode})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetNode().GetState() != adminv1.Node_STATE_RETIRED {
		t.Fatalf("the Docker node after the replacement: %v, want retired", got.GetNode().GetState())
	}

	startNode(t, core, ctx, cc, installation, msb)
	list, err := nodes.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var msbNode string
	for _, n := range list.GetNodes() {
		if n.GetState() == adminv1.Node_STATE_ENROLLED {
			msbNode = n.GetName()
		}
	}
	if msbNode == "" || len(list.GetNodes()) != 2 {
		t.Fatalf("nodes after enrolling the microsandbox node: %v", list.GetNodes())
	}
	if _, err := nodes.EnableNode(ctx, &adminv1.EnableNodeRequest{Name: msbNode}); err != nil {
		t.Fatalf("EnableNode: %v", err)
	}
	n := stack.WaitNode(t, ctx, nodes, msbNode, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetGeneration() == 2 && n.GetReadiness().GetDiagnosticCode() != ""
	})
	if n.GetReadiness().GetReady() || n.GetReadiness().GetDiagnosticCode() != want {
		t.Fatalf("the microsandbox node on generation 2: ready %v, diagnostic %q, want %q",
			n.GetReadiness().GetReady(), n.GetReadiness().GetDiagnosticCode(), want)
	}

	// The Docker node stays retired and is never ready for generation 2:
	// a Docker adapter cannot serve it (Core's binding check).
	got, err = nodes.GetNode(ctx, &adminv1.GetNodeRequest{Name: dockerNode})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetNode().GetState() != adminv1.Node_STATE_RETIRED || got.GetNode().GetReadiness().GetReady() {
		t.Fatalf("the Docker node after the microsandbox node came: state %v, readiness %v",
			got.GetNode().GetState(), got.GetNode().GetReadiness())
	}
	dep, err := deployments.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GetDeployment after the replacement: %v", dep.GetDeployment())
	served := map[string][]string{}
	for _, n := range dep.GetDeployment().GetNodes() {
		for _, g := range n.GetGenerations() {
			served[n.GetNode()] = append(served[n.GetNode()], fmt.Sprintf("%d:%s", g.GetGeneration(), g.GetDiagnosticCode()))
		}
	}
	if len(served[dockerNode]) != 0 || fmt.Sprint(served[msbNode]) != fmt.Sprintf("[2:%s]", want) {
		t.Fatalf("GetDeployment: the Docker node serves %v (want nothing), the microsandbox node %v (want [2:%s])",
			served[dockerNode], served[msbNode], want)
	}
}
