package microsandbox_test

import (
	"os"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/microsandbox"
	"berth.dev/sandbox/microsandbox/msbtest"
)

// The shared contract suite through the adapter's real process boundary
// (microsandbox.Exec), against fakemsb with native-side faults.

func TestMain(m *testing.M) {
	code := m.Run()
	msbtest.Cleanup()
	os.Exit(code)
}

var resources = sandbox.Resources{CPUMillis: 1500, MemoryBytes: 300 << 20, DiskBytes: 1 << 30}

// fixture is one adapter over a new fakemsb installation.
type fixture struct {
	p     *microsandbox.Provider
	f     *msbtest.Fixture
	state string
	opts  microsandbox.Options
}

func newFixture(t *testing.T) fixture {
	installation := uuid.NewString()
	f := msbtest.Start(t, installation)
	opts := microsandbox.Options{
		InstallationID: installation,
		Config: microsandbox.NodeConfig{
			MSB: f.Bin, Home: f.Home, Image: msbtest.Image, ImageDigest: msbtest.ImageDigest, Network: "none",
		},
		Resources:      resources,
		StateDirectory: t.TempDir(),
	}
	return fixture{p: microsandbox.New(f.Runner(), opts), f: f, state: opts.StateDirectory, opts: opts}
}

func newHarness(t *testing.T) contracttest.Harness {
	fx := newFixture(t)
	return contracttest.Harness{Provider: fx.p, Native: fx.f, Resources: resources}
}

func TestDeclaration(t *testing.T) {
	contracttest.RunDeclaration(t, microsandbox.New(nil, microsandbox.Options{}))
	contracttest.RunUnsupported(t, func(*testing.T) sandbox.SandboxProvider {
		return microsandbox.New(nil, microsandbox.Options{})
	})
}

func TestContractFailures(t *testing.T) {
	contracttest.RunFailures(t, newHarness, msbtest.ContractCases())
}
