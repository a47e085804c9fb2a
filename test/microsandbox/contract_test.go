package microsandbox

import (
	"path/filepath"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/microsandbox/msbtest"
	"berth.dev/sandbox/providercontract"

	"berth.dev/test/internal/stack"
)

// TestContractSuiteThroughTheNode is the microsandbox adapter's shared
// contract suite (msbtest.ContractCases, the table the in-process suite
// runs) through Core's proxy, real gRPC with mutual TLS and a real
// berth-nodeagent configured for microsandbox on a fake virtualizing host,
// with the faults injected at the native boundary: the fakemsb the node's
// adapter drives. Each case must give the same error class and the same
// exact msb calls as in process.
func TestContractSuiteThroughTheNode(t *testing.T) {
	factory := func(t *testing.T) contracttest.Harness {
		host, _, proxy := connectFakeNode(t)
		return contracttest.Harness{Provider: proxy, Native: host.MSB, Resources: stack.Resources}
	}
	contracttest.RunFailures(t, factory, msbtest.ContractCases())
}

// TestProxyDeclarationAndUnsupported: Core's proxy to a microsandbox node
// carries the adapter's declaration, checkpoints unsupported with the
// adapter's reason, and answers every operation declared unsupported
// with the typed error by itself: after the node agent has stopped, so
// an answer that needed the node would be a transport failure instead.
func TestProxyDeclarationAndUnsupported(t *testing.T) {
	host, n, proxy := connectFakeNode(t)
	contracttest.RunDeclaration(t, proxy)
	decl := proxy.ProviderOperations()
	for _, c := range sandbox.Inventory() {
		if c.Name != sandbox.ContractCheckpointProvider {
			continue
		}
		for _, op := range c.Methods {
			if d := decl[op]; d.State != providercontract.StateUnsupported || d.Reason != "microsandbox_no_checkpoints" {
				t.Errorf("%s: proxy declares %+v, want unsupported with microsandbox_no_checkpoints", op, d)
			}
		}
	}
	n.Stop()
	host.MSB.ResetCalls()
	contracttest.RunUnsupported(t, func(*testing.T) sandbox.SandboxProvider { return proxy })
	if calls := host.MSB.Args(); len(calls) != 0 {
		t.Errorf("answering unsupported operations reached msb: %q", calls)
	}
}

// connectFakeNode starts a node agent configured for microsandbox on a
// fake virtualizing host for a new installation whose Core is the test
// (stack.Node.Connect publishes the node's microsandbox generation), and
// returns the host, the node and Core's proxy to it.
func connectFakeNode(t *testing.T) (*fakeHost, *stack.Node, sandbox.SandboxProvider) {
	t.Helper()
	inst := stack.NewInstallation(t)
	host := newFakeHost(t, inst.ID, true)
	n := stack.PrepareNode(t, inst, stack.NodeOptions{Wrapper: host.Wrapper, HealthInterval: "500ms"})
	n.EditConfig(func(cfg map[string]any) {
		cfg["provider"] = "microsandbox"
		cfg["node"] = host.section(n.Dir)
	})
	n.ID = stack.EnrollNode(t, inst, filepath.Join(n.Dir, "state"))
	n.Start()
	t.Cleanup(n.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-nodeagent (microsandbox) log:\n%s", n.Logs())
		}
	})
	_, proxy := n.Connect(t, n.Dial(t), 1)
	return host, n, proxy
}
