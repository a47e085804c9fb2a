package stack

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
)

// Cluster is a real berth-core on a fresh database with one node agent on
// the test engine, enrolled, enabled and connected, and a committed Docker
// deployment of Spec: the start of most black-box scenarios.
type Cluster struct {
	Core *Core
	// CC and Ctx reach the admin API as the operator.
	CC  *grpc.ClientConn
	Ctx context.Context
	// Installation is the installation id.
	Installation string
	Node         *Node
	// NodeName is the node's admin API name ("nodes/{id}").
	NodeName string
	// Engine is a client of the test engine, for checks that read the
	// engine, never Berth's report.
	Engine *client.Client
	Spec   *adminv1.Specification
}

// OneNodeCluster starts a Cluster: Core with core (StartCoreWith's
// options), a node with node's options over the test engine and runtime
// image, configured with spec, which Core commits. When the test ends the
// engine's resources of the installation are removed and, if it failed,
// Core's log is written.
func OneNodeCluster(t testing.TB, spec *adminv1.Specification, core CoreOptions, node NodeOptions) *Cluster {
	t.Helper()
	host := testenv.DockerHost(t)
	node.Socket = strings.TrimPrefix(host, "unix://")
	node.Image = testenv.RuntimeImage(t)
	node.Specification = spec
	engine, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	c := StartCoreWith(t, storetest.NewDatabase(t), CoreStateDir(t), true, core)
	cc, ctx := c.AdminClient(t)
	inst := InstallationID(t, ctx, cc)
	n := EnrollAndStart(t, c, ctx, cc, inst, node, "")
	name := EnableAll(t, ctx, cc)[0]
	CommitDockerDeployment(t, ctx, cc, spec)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", c.Logs())
		}
		// Stopped first (their own cleanups repeat it harmlessly): a Core
		// or agent still running could make more after the removal, which
		// the suite's end would find (Run).
		n.Stop()
		c.Stop()
		RemoveOwned(t, engine, inst)
	})
	return &Cluster{Core: c, CC: cc, Ctx: ctx, Installation: inst, Node: n, NodeName: name, Engine: engine, Spec: spec}
}

// EngineNode starts a node agent over the test engine for a fresh
// installation (NewInstallation) whose Core is the test itself (Node.Connect
// gives Core's proxy), and a client of the engine. When the test ends it
// removes and reports anything labelled with the installation.
func EngineNode(t testing.TB) (*Installation, *Node, *client.Client) {
	t.Helper()
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	inst := NewInstallation(t)
	n := StartNode(t, inst, NodeOptions{Socket: strings.TrimPrefix(host, "unix://"), Image: image})
	cli, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, v := RemoveOwned(t, cli, inst.ID); c+v > 0 {
			t.Errorf("left behind %d containers and %d volumes", c, v)
		}
		_ = cli.Close()
	})
	return inst, n, cli
}
