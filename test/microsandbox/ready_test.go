package microsandbox

import (
	"slices"
	"testing"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/microsandbox/msbtest"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// TestMicrosandboxNodeOnAVirtualizingHostIsReady: the real berth-core and
// two real berth-nodeagent processes configured for microsandbox, each on
// a fake host (fakeHost: fakemsb as the pinned release holding the pinned
// image, the real /dev/kvm and memory) that differs only in the CPU flags
// its agent reads. Once Core commits a microsandbox deployment, GetNode
// shows the node whose CPUs have vmx connected and ready for that
// generation, bound to its msb home, and it stays so at later probes; the
// node whose CPUs have neither vmx nor svm is connected and not ready with
// hardware_virtualization_unavailable. So a node is ready exactly when its
// host passes every check, and the one check this machine fails is the
// only one the fake host changes.
func TestMicrosandboxNodeOnAVirtualizingHostIsReady(t *testing.T) {
	core := stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true, stack.CoreOptions{})
	cc, ctx := core.AdminClient(t)
	installation := stack.InstallationID(t, ctx, cc)
	logOnFailure(t, core)
	nodes := adminv1.NewNodeServiceClient(cc)

	virtualizing := newFakeHost(t, installation, true)
	startFakeNode(t, core, ctx, cc, installation, virtualizing)
	readyNode := stack.EnableAll(t, ctx, cc)[0]
	plain := newFakeHost(t, installation, false)
	startFakeNode(t, core, ctx, cc, installation, plain)
	var plainNode string
	for _, name := range stack.EnableAll(t, ctx, cc) {
		if name != readyNode {
			plainNode = name
		}
	}

	resp, err := adminv1.NewDeploymentServiceClient(cc).CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "microsandbox", Specification: stack.DefaultSpecification(),
	}})
	if err != nil {
		t.Fatalf("CommitDeployment of a microsandbox deployment: %v", err)
	}
	generation := resp.GetDeployment().GetGeneration()
	stack.WaitPublished(t, ctx, cc, generation)

	node := stack.WaitNode(t, ctx, nodes, readyNode, func(n *adminv1.Node) bool {
		return n.GetReadiness().GetGeneration() == generation && (n.GetReadiness().GetReady() || n.GetReadiness().GetDiagnosticCode() != "")
	})
	t.Logf("GetNode (vmx): backend %q, readiness %v", node.GetBackendFingerprint(), node.GetReadiness())
	if !stack.Connected(node) || !node.GetReadiness().GetReady() || node.GetReadiness().GetDiagnosticCode() != "" {
		t.Fatalf("GetNode on the host with vmx: connected %v, ready %v, diagnostic %q; want connected and ready for generation %d",
			stack.Connected(node), node.GetReadiness().GetReady(), node.GetReadiness().GetDiagnosticCode(), generation)
	}
	if want := "microsandbox:" + virtualizing.backendID(t); node.GetBackendFingerprint() != want {
		t.Errorf("GetNode: backend %q, want the fixture's msb home %q", node.GetBackendFingerprint(), want)
	}
	// The probe that made it ready read the pinned image from the fixture.
	inspect := []string{"image", "inspect", msbtest.Image, "--format", "json"}
	if !slices.ContainsFunc(virtualizing.MSB.Args(), func(a []string) bool { return slices.Equal(a, inspect) }) {
		t.Errorf("the fixture never saw the probe's %q: %q", inspect, virtualizing.MSB.Args())
	}
	first := node.GetReadiness().GetCheckTime().AsTime()
	again := stack.WaitNode(t, ctx, nodes, readyNode, func(n *adminv1.Node) bool {
		return n.GetReadiness().GetCheckTime().AsTime().After(first)
	})
	if !stack.Connected(again) || !again.GetReadiness().GetReady() || again.GetReadiness().GetGeneration() != generation {
		t.Fatalf("a later probe on the host with vmx: connected %v, readiness %v", stack.Connected(again), again.GetReadiness())
	}

	control := stack.WaitNode(t, ctx, nodes, plainNode, func(n *adminv1.Node) bool {
		return n.GetReadiness().GetGeneration() == generation && (n.GetReadiness().GetReady() || n.GetReadiness().GetDiagnosticCode() != "")
	})
	if !stack.Connected(control) || control.GetReadiness().GetReady() ||
		control.GetReadiness().GetDiagnosticCode() != "hardware_virtualization_unavailable" {
		t.Fatalf("GetNode on the host without vmx or svm: connected %v, ready %v, diagnostic %q; want connected, not ready, %q",
			stack.Connected(control), control.GetReadiness().GetReady(), control.GetReadiness().GetDiagnosticCode(),
			"hardware_virtualization_unavailable")
	}
}
