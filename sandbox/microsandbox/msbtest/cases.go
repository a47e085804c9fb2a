package msbtest

import (
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
)

// ContractCases is the microsandbox adapter's fault table for
// contracttest.RunFailures: under each fault, the error class and the
// exact msb calls the adapter makes. It is the same wherever the adapter
// runs, in process or behind a node agent (Calls leaves out the probe's).
func ContractCases() []contracttest.Case {
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
		{Operation: sandbox.OpCreate, Fault: FaultHang, At: "run", WantErr: unconfirmed, WantCalls: []string{"inspect", "run"}},
		// msb refuses (exit 1, no record) after the host directories were
		// written: unknown to the caller until Kill, in process as through
		// a node.
		{Operation: sandbox.OpCreate, Fault: FaultFail, At: "run", WantErr: unconfirmed, WantCalls: []string{"inspect", "run", "inspect"}},
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
		{Operation: sandbox.OpKill, Fault: FaultHang, At: "remove", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect", "list", "remove"}},
		{Operation: sandbox.OpKill, Fault: cleanup, At: "remove", Existing: true, WantErr: unconfirmed, WantCalls: []string{"inspect", "list", "remove"}},
		{Operation: sandbox.OpKill, Fault: foreign, WantErr: nil, WantCalls: []string{"inspect", "list"}},

		{Operation: sandbox.OpRunCommand, Fault: transport, At: "inspect", Existing: true, WantErr: unavailable, WantCalls: []string{"inspect"}},
		{Operation: sandbox.OpRunCommand, Fault: transport, At: "exec", Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{"inspect", "exec"}},
		{Operation: sandbox.OpRunCommand, Fault: cancel, At: "exec", Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{"inspect", "exec"}},
		{Operation: sandbox.OpRunCommand, Fault: FaultHang, At: "exec", Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{"inspect", "exec"}},
		{Operation: sandbox.OpRunCommand, Fault: foreign, WantErr: errdefs.ErrOwnership, WantCalls: []string{"inspect"}},
	}
}
