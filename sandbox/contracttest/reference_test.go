package contracttest_test

import (
	"context"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refadapter"
	"berth.dev/sandbox/internal/refnative"
)

const installation = "0b6c3c3e-8a57-4d0e-9b53-2f7d3cf4c1aa"

// refFixture adapts the refnative server to contracttest.Native.
type refFixture struct {
	srv     *refnative.Server
	p       *refadapter.Provider
	foreign map[string]refnative.Resource
}

func (f *refFixture) Arm(call string, fault contracttest.Fault, cancel context.CancelFunc) {
	switch fault {
	case contracttest.FaultTransport:
		f.srv.Arm(call, refnative.FaultDrop, nil)
	case contracttest.FaultCancelAfterDispatch:
		f.srv.Arm(call, refnative.FaultCancelAfterDispatch, cancel)
	case contracttest.FaultCleanupFailure:
		f.srv.Arm(call, refnative.FaultServerError, nil)
	}
}

func (f *refFixture) PlantForeign(ref sandbox.Reference) {
	name := f.p.Name(ref)
	labels := f.p.Labels(ref)
	labels[refadapter.LabelTenant] = contracttest.NewReference().TenantID
	f.srv.Put(name, labels, "running")
	res, _ := f.srv.Get(name)
	f.foreign[name] = res
}

func (f *refFixture) ForeignIntact() bool {
	for name, want := range f.foreign {
		got, ok := f.srv.Get(name)
		if !ok || got.ID != want.ID || got.State != want.State || got.Labels[refadapter.LabelTenant] != want.Labels[refadapter.LabelTenant] {
			return false
		}
	}
	return true
}

func (f *refFixture) Calls() []contracttest.NativeCall {
	var out []contracttest.NativeCall
	for _, c := range f.srv.Calls() {
		out = append(out, contracttest.NativeCall{Name: c, Mutating: refnative.Mutating(c)})
	}
	return out
}

func (f *refFixture) ResetCalls() { f.srv.ResetCalls() }

func (f *refFixture) Sensitive() []string {
	return []string{f.srv.URL, "secret-native-detail", "no such resource", "name in use"}
}

func newHarness(t *testing.T) contracttest.Harness {
	srv := refnative.Start(t)
	client := refadapter.NewClient()
	p := refadapter.New(srv.URL, installation, client)
	return contracttest.Harness{Provider: p, Native: &refFixture{srv: srv, p: p, foreign: map[string]refnative.Resource{}}}
}

func TestReferenceAdapterDeclaration(t *testing.T) {
	contracttest.RunDeclaration(t, refadapter.New("", installation, nil))
}

func TestReferenceAdapterUnsupported(t *testing.T) {
	contracttest.RunUnsupported(t, func(*testing.T) sandbox.SandboxProvider {
		return refadapter.New("", installation, nil)
	})
}

func TestReferenceAdapterFailures(t *testing.T) {
	const (
		inspect, create, bootstrap, start = refnative.CallInspect, refnative.CallCreate, refnative.CallBootstrap, refnative.CallStart
		remove, exec                      = refnative.CallRemove, refnative.CallExec
	)
	T, C := contracttest.FaultTransport, contracttest.FaultCancelAfterDispatch
	F, X := contracttest.FaultForeignOwnership, contracttest.FaultCleanupFailure
	unconfirmed, unobserved := errdefs.ErrComputeUnconfirmed, errdefs.ErrObservationUnavailable
	cases := []contracttest.Case{
		{Operation: sandbox.OpCreate, Fault: T, At: create, WantErr: unconfirmed, WantCalls: []string{inspect, create}},
		{Operation: sandbox.OpCreate, Fault: T, At: bootstrap, WantErr: unconfirmed, WantCalls: []string{inspect, create, bootstrap}},
		{Operation: sandbox.OpCreate, Fault: T, At: start, WantErr: unconfirmed, WantCalls: []string{inspect, create, bootstrap, start}},
		{Operation: sandbox.OpCreate, Fault: C, At: create, WantErr: unconfirmed, WantCalls: []string{inspect, create}},
		{Operation: sandbox.OpCreate, Fault: C, At: start, WantErr: unconfirmed, WantCalls: []string{inspect, create, bootstrap, start}},
		{Operation: sandbox.OpCreate, Fault: X, At: create, WantErr: unconfirmed, WantCalls: []string{inspect, create}},
		{Operation: sandbox.OpCreate, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{inspect}},

		{Operation: sandbox.OpGetInfo, Fault: T, At: inspect, Existing: true, WantErr: unobserved, WantCalls: []string{inspect}},
		{Operation: sandbox.OpGetInfo, Fault: C, At: inspect, Existing: true, WantErr: unobserved, WantCalls: []string{inspect}},
		{Operation: sandbox.OpGetInfo, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{inspect}},

		{Operation: sandbox.OpRenew, Fault: T, At: inspect, Existing: true, WantErr: unconfirmed, WantCalls: []string{inspect}},
		{Operation: sandbox.OpRenew, Fault: C, At: inspect, Existing: true, WantErr: unconfirmed, WantCalls: []string{inspect}},
		{Operation: sandbox.OpRenew, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{inspect}},

		{Operation: sandbox.OpKill, Fault: T, At: inspect, Existing: true, WantErr: unconfirmed, WantCalls: []string{inspect}},
		{Operation: sandbox.OpKill, Fault: T, At: remove, Existing: true, WantErr: unconfirmed, WantCalls: []string{inspect, remove}},
		{Operation: sandbox.OpKill, Fault: C, At: remove, Existing: true, WantErr: unconfirmed, WantCalls: []string{inspect, remove}},
		{Operation: sandbox.OpKill, Fault: X, At: remove, Existing: true, WantErr: unconfirmed, WantCalls: []string{inspect, remove}},
		{Operation: sandbox.OpKill, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{inspect}},

		{Operation: sandbox.OpRunCommand, Fault: T, At: exec, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{inspect, exec}},
		{Operation: sandbox.OpRunCommand, Fault: C, At: exec, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{inspect, exec}},
		{Operation: sandbox.OpRunCommand, Fault: X, At: exec, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{inspect, exec}},
		{Operation: sandbox.OpRunCommand, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{inspect}},
	}
	contracttest.RunFailures(t, newHarness, cases)
}
