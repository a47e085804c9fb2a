package nodeproto

import (
	"testing"

	"berth.dev/sandbox/docker/dockertest"

	"berth.dev/test/internal/stack"
)

// TestMain builds berth-core and berth-nodeagent once for the package.
func TestMain(m *testing.M) { stack.Main(m) }

// startFixtureNode starts a node agent of a new installation on a new
// dockertest engine serving the fixture image: the single node most of the
// protocol tests drive directly.
func startFixtureNode(t *testing.T) (*stack.Installation, *dockertest.Server, *stack.Node) {
	t.Helper()
	inst := stack.NewInstallation(t)
	engine := stack.FixtureEngine(t)
	return inst, engine, stack.StartNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage})
}
