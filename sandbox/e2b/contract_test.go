package e2b_test

import (
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
)

// The shared contract suite through the adapter's real HTTP boundary,
// against the loopback fixture with native-side faults.

func newHarness(t *testing.T) contracttest.Harness {
	f := e2btest.Start(t)
	return contracttest.Harness{Provider: f.Provider(t), Native: f}
}

func TestDeclaration(t *testing.T) {
	contracttest.RunDeclaration(t, e2b.Unconfigured())
	contracttest.RunUnsupported(t, func(*testing.T) sandbox.SandboxProvider { return e2b.Unconfigured() })
}

func TestContractFailures(t *testing.T) {
	t.Parallel()
	contracttest.RunFailures(t, newHarness, e2btest.ContractCases())
}
