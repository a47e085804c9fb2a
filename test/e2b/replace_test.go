package e2b

import (
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// TestDockerToE2BAndBack is the change of kind both ways (issue 30's
// "Done when", docs/direct-lifecycle-plan.md §7) with the real binaries:
// Core's TLS Runtime gateway on the engine's bridge, a real node agent on
// the test Docker engine with the runtime image, and the E2B fixture.
//
//  1. A Session on the Docker deployment (generation 1) runs a Turn in its
//     container.
//  2. berthctl replaces the deployment with E2B (generation 2, the key on
//     stdin): the Docker node is retired in the same commit and keeps
//     serving its Session, which keeps generation 1 and runs a Turn that
//     reads what the first wrote; a new Session lands on the direct lane
//     (no node, generation 2) in a fixture sandbox whose real Runtime runs
//     a Turn.
//  3. ReplaceDeployment back to Docker (generation 3) and EnableNode: the
//     node serves generation 3 and a third Session lands on it, while the
//     first two keep their generations; a Turn runs in each of the three.
//  4. Deleting the three leaves the engine with no container or volume of
//     the installation (counted from the engine), the fixture with no
//     sandbox, and the process table with no process of the E2B
//     sandbox. The API key is in no log (the node agent's included) and no
//     argv.
func TestDockerToE2BAndBack(t *testing.T) {
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	requireNamespaces(t)
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	opts, gw := stack.RuntimeGateway(t, cli)
	opts.PublicURL = "https://" + gw
	e := newEnv(t, opts)
	node := stack.EnrollAndStart(t, e.core, e.ctx, e.cc, e.inst, stack.NodeOptions{
		Socket: strings.TrimPrefix(host, "unix://"), Image: image, Network: "bridge", HealthInterval: "500ms",
	}, "")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-nodeagent log:\n%s", node.Logs())
		}
		node.Stop()
		e.core.Stop()
		stack.RemoveOwned(t, cli, e.inst)
	})
	nodeName := stack.EnableAll(t, e.ctx, e.cc)[0]
	nodes := adminv1.NewNodeServiceClient(e.cc)
	if _, err := e.deploys.CommitDeployment(e.ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "docker", Specification: spec(),
	}}); err != nil {
		t.Fatalf("CommitDeployment of the Docker deployment: %v", err)
	}
	e.waitNodeReady(nodes, nodeName, 1)

	// 1. Docker.
	first := e.createSession()
	a1 := e.waitActive(first)
	if a1.GetNode() != nodeName || a1.GetGeneration() != 1 {
		t.Fatalf("the first Session: node %q, generation %d; want %s, 1", a1.GetNode(), a1.GetGeneration(), nodeName)
	}
	e.wantTurn(first, `echo on-docker > /workspace/mark; cat /workspace/mark`, "on-docker\n")

	// 2. Docker → E2B.
	if out, errOut, code := e.ctl(e.e2bCandidate(), "deployment", "replace", "-f", "-", "--expected-generation", "1"); code != 0 {
		t.Fatalf("berthctl deployment replace with the E2B candidate: exit %d\n%s%s", code, out, errOut)
	}
	n, err := nodes.GetNode(e.ctx, &adminv1.GetNodeRequest{Name: nodeName})
	if err != nil {
		t.Fatal(err)
	}
	if n.GetNode().GetState() != adminv1.Node_STATE_RETIRED {
		t.Fatalf("the Docker node after the replacement with E2B: %v, want RETIRED", n.GetNode().GetState())
	}
	e.waitDirectReady(2)
	e.wantTurn(first, `cat /workspace/mark`, "on-docker\n")
	second := e.createSession()
	a2 := e.waitActive(second)
	if a2.GetNode() != "" || a2.GetGeneration() != 2 {
		t.Fatalf("the second Session: node %q, generation %d; want the direct lane, 2", a2.GetNode(), a2.GetGeneration())
	}
	sb := e.sandboxOf(a2.GetName())
	ns := e.runtimeProcesses(sb, 2)
	e.wantTurn(second, `echo on-e2b; ls /usr/local/bin`, "on-e2b\nberth-runtime\n")
	if c, _ := stack.Owned(t, cli, e.inst); c != 1 {
		t.Fatalf("the engine holds %d containers of the installation, want the first Session's only", c)
	}

	// 3. E2B → Docker.
	if _, err := e.deploys.ReplaceDeployment(e.ctx, &adminv1.ReplaceDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "docker", Specification: spec(),
	}, ExpectedGeneration: 2}); err != nil {
		t.Fatalf("ReplaceDeployment back to Docker: %v", err)
	}
	if _, err := nodes.EnableNode(e.ctx, &adminv1.EnableNodeRequest{Name: nodeName}); err != nil {
		t.Fatalf("EnableNode of the retired Docker node: %v", err)
	}
	e.waitNodeReady(nodes, nodeName, 3)
	third := e.createSession()
	a3 := e.waitActive(third)
	if a3.GetNode() != nodeName || a3.GetGeneration() != 3 {
		t.Fatalf("the third Session: node %q, generation %d; want %s, 3", a3.GetNode(), a3.GetGeneration(), nodeName)
	}
	for _, s := range []struct {
		session, alloc string
		generation     uint64
		script, want   string
	}{
		{first, a1.GetName(), 1, `cat /workspace/mark`, "on-docker\n"},
		{second, a2.GetName(), 2, `echo still-on-e2b`, "still-on-e2b\n"},
		{third, a3.GetName(), 3, `test ! -e /workspace/mark && echo fresh-docker`, "fresh-docker\n"},
	} {
		e.wantTurn(s.session, s.script, s.want)
		if a := e.allocation(s.alloc); a.GetState() != adminv1.Allocation_STATE_ACTIVE || a.GetGeneration() != s.generation {
			t.Fatalf("%s after both replacements: %v, generation %d; want ACTIVE, %d", s.alloc, a.GetState(), a.GetGeneration(), s.generation)
		}
	}
	if c, _ := stack.Owned(t, cli, e.inst); c != 2 || len(e.fixture.Sandboxes()) != 1 {
		t.Fatalf("the engine holds %d containers, the fixture %d sandboxes; want 2 and 1", c, len(e.fixture.Sandboxes()))
	}

	// 4. Nothing left on either side.
	e.deleteSessions(first, second, third)
	stack.WaitFor(t, time.Minute, "nothing of the installation in the engine or the fixture", func() bool {
		c, v := stack.Owned(t, cli, e.inst)
		return c == 0 && v == 0 && len(e.fixture.Sandboxes()) == 0
	})
	e.waitNoProcesses(ns, sb.Dir)
	e.checkNoKey(1)
	if strings.Contains(node.Logs(), e.fixture.Key) {
		t.Error("the node agent's log carries the E2B API key")
	}
}

// waitNodeReady waits until node is connected and ready for generation.
func (e *env) waitNodeReady(nodes adminv1.NodeServiceClient, node string, generation uint64) {
	e.t.Helper()
	stack.WaitNode(e.t, e.ctx, nodes, node, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == generation
	})
}
