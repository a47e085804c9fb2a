package contracttest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Fault is a native-side failure the fixture injects.
type Fault string

// The faults every adapter is tested with.
const (
	// FaultTransport: the native side receives the call, does not perform
	// it, and the connection drops without an answer.
	FaultTransport Fault = "transport"
	// FaultCancelAfterDispatch: the native side performs the call, then the
	// caller's context is cancelled before the answer arrives.
	FaultCancelAfterDispatch Fault = "cancel_after_dispatch"
	// FaultForeignOwnership: resources with the names the Reference's
	// resources would have exist, owned by someone else.
	FaultForeignOwnership Fault = "foreign_ownership"
	// FaultCleanupFailure: the native side refuses a removal.
	FaultCleanupFailure Fault = "cleanup_failure"
)

// NativeCall is one call the fixture received.
type NativeCall struct {
	Name     string
	Mutating bool
}

// Native is the native-side fixture of the adapter under test.
type Native interface {
	// Arm makes the next native call named call fail with fault
	// (FaultTransport, FaultCancelAfterDispatch or FaultCleanupFailure).
	// For FaultCancelAfterDispatch the fixture runs cancel after performing
	// the call and withholds the answer.
	Arm(call string, fault Fault, cancel context.CancelFunc)
	// PlantForeign creates resources named as ref's would be but labelled
	// for another owner.
	PlantForeign(ref sandbox.Reference)
	// ForeignIntact reports whether every planted foreign resource still
	// exists unchanged.
	ForeignIntact() bool
	// Calls returns the calls received since the last ResetCalls, in order.
	Calls() []NativeCall
	ResetCalls()
	// Sensitive lists strings that must never appear in an error returned
	// by the adapter: native error text, endpoints, native ids.
	Sensitive() []string
}

// Harness is one adapter wired to its fixture.
type Harness struct {
	Provider sandbox.SandboxProvider
	Native   Native
	// Resources sizes Create requests; zero uses a small valid default.
	Resources sandbox.Resources
}

// Case is one fault scenario. WantCalls is the exact list of native call
// names the operation makes, which the adapter's test authors and reviews.
type Case struct {
	Operation providercontract.Operation
	Fault     Fault
	// At is the native call the fault hits (unused for foreign ownership).
	At string
	// Existing creates the Reference's compute through the adapter, without
	// faults, before the operation under test.
	Existing bool
	// WantErr is the error class the operation must return. Only Kill
	// under foreign ownership may want nil: nothing owned exists under the
	// Reference's names, so there is nothing to clean up, and the foreign
	// resources stay untouched either way.
	WantErr error
	// WantAbsenceReceipt, only for Create under foreign ownership, requires
	// the explicit absence receipt with the error: the adapter refused
	// before any mutation, so the one attempt can never make anything.
	// Without it a failed operation must claim no settlement.
	WantAbsenceReceipt bool
	WantCalls          []string
}

func (c Case) name() string {
	n := string(c.Operation) + "/" + string(c.Fault)
	if c.At != "" {
		n += "@" + c.At
	}
	if c.Existing {
		n += "/existing"
	}
	return n
}

// requiredCoverage is the fault set every adapter's cases must include.
var requiredCoverage = map[providercontract.Operation][]Fault{
	sandbox.OpCreate:     {FaultTransport, FaultCancelAfterDispatch, FaultForeignOwnership},
	sandbox.OpGetInfo:    {FaultTransport, FaultCancelAfterDispatch, FaultForeignOwnership},
	sandbox.OpRenew:      {FaultTransport, FaultCancelAfterDispatch, FaultForeignOwnership},
	sandbox.OpKill:       {FaultTransport, FaultCancelAfterDispatch, FaultForeignOwnership, FaultCleanupFailure},
	sandbox.OpRunCommand: {FaultTransport, FaultCancelAfterDispatch, FaultForeignOwnership},
}

// RunFailures runs every case against a fresh harness from factory and
// checks that cases cover every required (operation, fault) pair.
func RunFailures(t *testing.T, factory func(t *testing.T) Harness, cases []Case) {
	t.Helper()
	covered := map[providercontract.Operation]map[Fault]bool{}
	for _, c := range cases {
		if covered[c.Operation] == nil {
			covered[c.Operation] = map[Fault]bool{}
		}
		covered[c.Operation][c.Fault] = true
	}
	for op, faults := range requiredCoverage {
		for _, f := range faults {
			if !covered[op][f] {
				t.Errorf("cases do not cover %s under %s", op, f)
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) { CheckCase(t, factory(t), c) })
	}
}

// NewReference returns a fresh Reference of canonical UUIDs.
func NewReference() sandbox.Reference {
	return sandbox.Reference{
		TenantID:      uuid.NewString(),
		EnvironmentID: uuid.NewString(),
		AllocationID:  uuid.NewString(),
	}
}

// CreateRequest returns a valid Create request for ref. The credential is
// random per call.
func CreateRequest(ref sandbox.Reference, res sandbox.Resources) sandbox.CreateRequest {
	if res == (sandbox.Resources{}) {
		res = sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}
	}
	return sandbox.CreateRequest{
		Reference: ref,
		Resources: res,
		Bootstrap: runtimebootstrap.File{
			Version:    runtimebootstrap.Version,
			CoreURL:    "https://core.berth.test:8443",
			DeviceID:   uuid.NewString(),
			Credential: runtimebootstrap.NewSecret(strings.ReplaceAll(uuid.NewString()+uuid.NewString(), "-", "")),
		},
	}
}

// Reporter is the part of testing.TB that CheckCase reports through.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// CheckCase runs one case against h and reports every violation. RunFailures
// calls it per case; it is exported so that the suite's own tests can prove
// it fails for adapters that break the contract.
func CheckCase(t Reporter, h Harness, c Case) {
	t.Helper()
	ref := NewReference()
	if c.Existing {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		info, err := h.Provider.Create(ctx, CreateRequest(ref, h.Resources))
		cancel()
		if err != nil || !info.IsSettledRunning(ref) {
			t.Fatalf("setup Create: %+v, %v", info, err)
		}
	}
	if c.Fault == FaultForeignOwnership {
		h.Native.PlantForeign(ref)
	}
	h.Native.ResetCalls()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.Fault != FaultForeignOwnership {
		h.Native.Arm(c.At, c.Fault, cancel)
	}
	info, hasInfo, err := runCase(ctx, t, h, c, ref)
	checkCaseError(t, h, c, err)
	if hasInfo {
		checkCaseInfo(t, c, ref, info)
	}

	checkNativeCalls(t, h, c.WantCalls, c.Fault == FaultForeignOwnership, nil)

	// After an unknown Create, recovery observes the original Reference and
	// never creates again.
	if c.Operation == sandbox.OpCreate && c.Fault != FaultForeignOwnership {
		checkCreateRecovery(t, h, c, ref)
	}
}

// runCase performs c.Operation on ref once, under the armed fault.
// hasInfo says whether the operation returns an Info (Create, GetInfo,
// Renew) that checkCaseInfo must judge.
func runCase(ctx context.Context, t Reporter, h Harness, c Case, ref sandbox.Reference) (info sandbox.Info, hasInfo bool, err error) {
	t.Helper()
	switch c.Operation {
	case sandbox.OpCreate:
		info, err = h.Provider.Create(ctx, CreateRequest(ref, h.Resources))
		hasInfo = true
	case sandbox.OpGetInfo:
		info, err = h.Provider.GetInfo(ctx, ref)
		hasInfo = true
	case sandbox.OpRenew:
		info, err = h.Provider.Renew(ctx, ref)
		hasInfo = true
	case sandbox.OpKill:
		err = h.Provider.Kill(ctx, sandbox.KillRequest{Reference: ref})
	case sandbox.OpRunCommand:
		var res sandbox.CommandResult
		res, err = h.Provider.RunCommand(ctx, ref, sandbox.Command{Args: []string{"echo", "hello"}})
		if !isZeroResult(res) {
			t.Errorf("RunCommand returned a result with its error: %+v", res)
		}
	default:
		t.Fatalf("no failure scenario for operation %s", c.Operation)
	}
	return info, hasInfo, err
}

// checkCaseError checks that the case itself is well formed (only Kill
// under foreign ownership may succeed, only a Create refused for foreign
// ownership may settle) and that the operation's error has the wanted
// class and no native detail.
func checkCaseError(t Reporter, h Harness, c Case, err error) {
	t.Helper()
	switch {
	case c.WantErr == nil && (c.Operation != sandbox.OpKill || c.Fault != FaultForeignOwnership):
		t.Errorf("case %s wants no error: only Kill under foreign ownership may succeed", c.name())
	case err == nil && c.WantErr != nil:
		t.Errorf("%s under %s returned no error", c.Operation, c.Fault)
	}
	if c.WantAbsenceReceipt && (c.Operation != sandbox.OpCreate || c.Fault != FaultForeignOwnership) {
		t.Errorf("case %s wants an absence receipt: only a Create refused for foreign ownership may settle", c.name())
	}
	if errdefs.IsUnsupported(err) {
		t.Errorf("a fault surfaced as Unsupported: %v", err)
	}
	if !errors.Is(err, c.WantErr) {
		t.Errorf("error = %v, want class %v", err, c.WantErr)
	}
	for _, s := range h.Native.Sensitive() {
		if err != nil && s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error leaks native detail %q: %v", s, err)
		}
	}
}

// checkCaseInfo checks the Info a failed operation returned: the absence
// receipt where the case wants one, otherwise no claim of settlement, and
// never another reference or a contradiction.
func checkCaseInfo(t Reporter, c Case, ref sandbox.Reference, info sandbox.Info) {
	t.Helper()
	switch {
	case c.WantAbsenceReceipt:
		if !info.IsAbsenceReceipt(ref) {
			t.Errorf("a Create refused before any mutation returned %+v, want the absence receipt", info)
		}
	case info.CreateSettled || info.BootstrapComplete:
		t.Errorf("a failed %s claimed settlement: %+v", c.Operation, info)
	}
	if !info.Reference.IsZero() && info.Reference != ref {
		t.Errorf("info names another reference: %+v", info.Reference)
	}
	if cerr := info.CheckFor(ref); cerr != nil {
		t.Errorf("contradictory info: %v", cerr)
	}
}

// checkCreateRecovery observes ref after a faulted Create as Core's
// recovery would: GetInfo sends no mutating call, and after a dispatched
// Create it finds the original Reference.
func checkCreateRecovery(t Reporter, h Harness, c Case, ref sandbox.Reference) {
	t.Helper()
	h.Native.ResetCalls()
	octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
	observed, oerr := h.Provider.GetInfo(octx, ref)
	ocancel()
	for _, call := range h.Native.Calls() {
		if call.Mutating {
			t.Errorf("observation after a failed Create made mutating call %s", call.Name)
		}
	}
	if c.Fault == FaultCancelAfterDispatch {
		if oerr != nil || observed.Reference != ref || observed.ProviderID == "" {
			t.Errorf("after a dispatched Create, GetInfo = %+v, %v; want the original reference observed", observed, oerr)
		}
	}
}

// checkNativeCalls checks the calls h's fixture received since its last
// reset against want: exactly those, no mutating call sent more often
// than want has it (a replay: the exact list catches it too, this names
// it), and under foreign ownership no mutation at all and every foreign
// resource intact. onMutation, when not nil, sees each mutating call.
func checkNativeCalls(t Reporter, h Harness, want []string, foreign bool, onMutation func(name string)) {
	t.Helper()
	calls := h.Native.Calls()
	names := make([]string, len(calls))
	sent := map[string]int{}
	for i, call := range calls {
		names[i] = call.Name
		if !call.Mutating {
			continue
		}
		sent[call.Name]++
		if foreign {
			t.Errorf("mutating native call %s made despite foreign ownership", call.Name)
		}
		if onMutation != nil {
			onMutation(call.Name)
		}
	}
	for name, n := range sent {
		if w := count(want, name); n > w {
			t.Errorf("mutating native call %s was sent %d times, want %d (replay)", name, n, w)
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("native calls = %q, want exactly %q", names, want)
	}
	if foreign && !h.Native.ForeignIntact() {
		t.Errorf("a foreign resource was changed or removed")
	}
}

func isZeroResult(r sandbox.CommandResult) bool {
	return len(r.Stdout) == 0 && len(r.Stderr) == 0 && r.ExitCode == 0 && !r.StdoutTruncated && !r.StderrTruncated
}

func count(list []string, name string) int {
	n := 0
	for _, s := range list {
		if s == name {
			n++
		}
	}
	return n
}
