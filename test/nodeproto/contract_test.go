package nodeproto

import (
	"context"
	"errors"
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/providercontract"

	"berth.dev/core/nodes"

	"berth.dev/test/internal/stack"
)

// The shared contract suite through Core's proxy, real gRPC with mutual
// TLS, a real berth-nodeagent process and its Docker adapter, with faults
// injected at the native boundary (the Docker API fixture).
func TestContractSuiteThroughTheNode(t *testing.T) {
	factory := func(t *testing.T) contracttest.Harness {
		inst, engine, n := startFixtureNode(t)
		_, proxy := n.Connect(t, n.Dial(t), 1)
		return contracttest.Harness{Provider: proxy, Native: dockertest.NewNative(engine, inst.ID), Resources: stack.Resources}
	}
	contracttest.RunFailures(t, factory, dockertest.ContractCases())
}

// TestCheckpointSuiteThroughTheNode is the checkpoint cases through the
// same path: Core's proxy, the node agent and its Docker adapter, with the
// same exact native calls as in process.
func TestCheckpointSuiteThroughTheNode(t *testing.T) {
	factory := func(t *testing.T) contracttest.Harness {
		inst, engine, n := startFixtureNode(t)
		_, proxy := n.Connect(t, n.Dial(t), 1)
		return contracttest.Harness{Provider: proxy, Native: dockertest.NewNative(engine, inst.ID), Resources: stack.Resources}
	}
	contracttest.RunCheckpointFailures(t, factory, dockertest.CheckpointCases())
}

func TestProxyDeclarationAndUnsupported(t *testing.T) {
	_, _, n := startFixtureNode(t)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	contracttest.RunDeclaration(t, proxy)
	for _, op := range []providercontract.Operation{sandbox.OpObserveBatch, sandbox.OpDiscoverSelection, sandbox.OpVerifyCredential} {
		if d := proxy.ProviderOperations()[op]; d.State != providercontract.StateUnsupported || !strings.HasPrefix(string(d.Reason), "node_transport_") {
			t.Errorf("%s: proxy declares %+v, want unsupported by the transport", op, d)
		}
	}
	// Declared-unsupported operations are answered before any node is
	// resolved: a proxy with no way to reach its node still answers them.
	noNode := errors.New("no node")
	contracttest.RunUnsupported(t, func(*testing.T) sandbox.SandboxProvider {
		p, err := nodes.NewProxy(proxy.ProviderOperations(), func(context.Context) (*nodes.Session, error) {
			return nil, noNode
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}
