package microsandbox_test

import (
	"os"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
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
	contracttest.RunFailures(t, newHarness, contractCases())
}

func contractCases() []contracttest.Case {
	const (
		transport = contracttest.FaultTransport
		cancel    = contracttest.FaultCancelAfterDispatch
		foreign   = contracttest.FaultForeignOwnership
		cleanup   = contracttest.FaultCleanupFailure
	)
	unconfirmed, unavailable := errdefs.ErrComputeUnconfirmed, errdefs.ErrObservationUnavailable
	return []contracttest.Case{
		{Operation: sandbox.OpCreate, Fault: transport, At: "inspect", WantErr: unconfirmed, WantCalls: []string{"inspect"}},
		{Operation: sandbox.OpCreate, Fault: transport, At: "run", WantErr: unconfirmed, WantCalls: []string{"inspect", "run"}},
		{Operation: sandbox.OpCreate, Fault: cancel, At: "run", WantErr: unconfirmed, WantCalls: []string{"inspect", "run"}},
		{Operation: sandbox.OpCreate, Fault: msbtest.FaultHang, At: "run", WantErr: unconfirmed, WantCalls: []string{"inspect", "run"}},
		// msb refuses (exit 1, no record) after the host directories were
		// written: unknown to the caller until Kill, in process as through
		// a node.
		{Operation: sandbox.OpCreate, Fault: msbtest.FaultFail, At: "run", WantErr: unconfirmed, WantCalls: []string{"inspect", "run", "inspect"}},
		{Operation: sandbox.OpCreate, Fault: foreign, WantErr: errdefs.ErrOwnership, WantAbsenceReceipt: true, WantCalls: []string{"inspect"}},

		{Operation: sandbox.OpGetInfo, Fault: transport, At: "inspect", Existing: true, WantErr: unavailable, WantCalls: []string{"inspect"}},
		{Operation: sandbox.OpGetInfo, Fault: cancel, At: "inspect", Existing: true, WantErr: unavailable, WantCalls: []string{"inspect"}},
		{Operation: sandbox.OpGetInfo, Fault: foreign, WantErr: errdefs.ErrOwnership, WantCalls: []string{"inspect"}},

		{Operation: sandbox.OpRenew, Fault: transport, At: "inspect", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect"}},
		{Operation: sandbox.OpRenew, Fault: cancel, At: "inspect", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect"}},
		{Operation: sandbox.OpRenew, Fault: foreign, WantErr: errdefs.ErrOwnership, WantCalls: []string{"inspect"}},

		{Operation: sandbox.OpKill, Fault: transport, At: "inspect", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect"}},
		{Operation: sandbox.OpKill, Fault: transport, At: "list", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect", "list"}},
		{Operation: sandbox.OpKill, Fault: transport, At: "remove", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect", "list", "remove"}},
		{Operation: sandbox.OpKill, Fault: cancel, At: "remove", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect", "list", "remove"}},
		{Operation: sandbox.OpKill, Fault: msbtest.FaultHang, At: "remove", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect", "list", "remove"}},
		{Operation: sandbox.OpKill, Fault: cleanup, At: "remove", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect", "list", "remove"}},
		{Operation: sandbox.OpKill, Fault: foreign, WantErr: nil, WantCalls: []string{"inspect", "list"}},

		{Operation: sandbox.OpRunCommand, Fault: transport, At: "inspect", Existing: true, WantErr: unavailable, WantCalls: []string{"inspect"}},
		{Operation: sandbox.OpRunCommand, Fault: transport, At: "exec", Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{"inspect", "exec"}},
		{Operation: sandbox.OpRunCommand, Fault: cancel, At: "exec", Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{"inspect", "exec"}},
		{Operation: sandbox.OpRunCommand, Fault: msbtest.FaultHang, At: "exec", Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{"inspect", "exec"}},
		{Operation: sandbox.OpRunCommand, Fault: foreign, WantErr: errdefs.ErrOwnership, WantCalls: []string{"inspect"}},
	}
}
