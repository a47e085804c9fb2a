package e2btest

import (
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
)

// ContractCases is the E2B adapter's fault table for
// contracttest.RunFailures: under each fault, the error class and the
// exact calls the adapter makes (the fixture's call names: create, list,
// get, timeout, kill on the control plane; start, input, close_stdin,
// signal, processes on envd).
func ContractCases() []contracttest.Case {
	const (
		transport = contracttest.FaultTransport
		cancel    = contracttest.FaultCancelAfterDispatch
		foreign   = contracttest.FaultForeignOwnership
		cleanup   = contracttest.FaultCleanupFailure
	)
	unconfirmed, unavailable := errdefs.ErrComputeUnconfirmed, errdefs.ErrObservationUnavailable
	command := errdefs.ErrCommandUnconfirmed
	return []contracttest.Case{
		// Create: the listing fails before anything is sent; the POST's
		// answer is lost (not performed, performed and cancelled,
		// performed and 500, performed and dropped, 500 unperformed); the
		// bootstrap breaks after the sandbox exists.
		{Operation: sandbox.OpCreate, Fault: transport, At: "list", WantErr: unavailable, WantCalls: []string{"list"}},
		{Operation: sandbox.OpCreate, Fault: transport, At: "create", WantErr: unconfirmed, WantCalls: []string{"list", "create"}},
		{Operation: sandbox.OpCreate, Fault: cancel, At: "create", WantErr: unconfirmed, WantCalls: []string{"list", "create"}},
		{Operation: sandbox.OpCreate, Fault: FaultCommit500, At: "create", WantErr: unconfirmed, WantCalls: []string{"list", "create"}},
		{Operation: sandbox.OpCreate, Fault: FaultLostAnswer, At: "create", WantErr: unconfirmed, WantCalls: []string{"list", "create"}},
		{Operation: sandbox.OpCreate, Fault: Fault500, At: "create", WantErr: unconfirmed, WantCalls: []string{"list", "create"}},
		{Operation: sandbox.OpCreate, Fault: transport, At: "start", WantErr: unconfirmed, WantCalls: []string{"list", "create", "start"}},
		{Operation: sandbox.OpCreate, Fault: transport, At: "input", WantErr: unconfirmed, WantCalls: []string{"list", "create", "start", "input"}},
		{Operation: sandbox.OpCreate, Fault: foreign, WantErr: errdefs.ErrOwnership, WantAbsenceReceipt: true, WantCalls: []string{"list"}},

		{Operation: sandbox.OpGetInfo, Fault: transport, At: "list", Existing: true, WantErr: unavailable, WantCalls: []string{"list"}},
		{Operation: sandbox.OpGetInfo, Fault: cancel, At: "list", Existing: true, WantErr: unavailable, WantCalls: []string{"list"}},
		{Operation: sandbox.OpGetInfo, Fault: transport, At: "get", Existing: true, WantErr: unavailable, WantCalls: []string{"list", "get"}},
		{Operation: sandbox.OpGetInfo, Fault: transport, At: "processes", Existing: true, WantErr: unavailable, WantCalls: []string{"list", "get", "processes"}},
		{Operation: sandbox.OpGetInfo, Fault: foreign, WantErr: errdefs.ErrOwnership, WantCalls: []string{"list"}},

		{Operation: sandbox.OpRenew, Fault: transport, At: "list", Existing: true, WantErr: unavailable, WantCalls: []string{"list"}},
		{Operation: sandbox.OpRenew, Fault: transport, At: "timeout", Existing: true, WantErr: unconfirmed, WantCalls: []string{"list", "timeout"}},
		{Operation: sandbox.OpRenew, Fault: cancel, At: "timeout", Existing: true, WantErr: unconfirmed, WantCalls: []string{"list", "timeout"}},
		{Operation: sandbox.OpRenew, Fault: FaultCommit500, At: "timeout", Existing: true, WantErr: unconfirmed, WantCalls: []string{"list", "timeout"}},
		{Operation: sandbox.OpRenew, Fault: transport, At: "get", Existing: true, WantErr: unconfirmed, WantCalls: []string{"list", "timeout", "get"}},
		{Operation: sandbox.OpRenew, Fault: foreign, WantErr: errdefs.ErrOwnership, WantCalls: []string{"list"}},

		{Operation: sandbox.OpKill, Fault: transport, At: "list", Existing: true, WantErr: unconfirmed, WantCalls: []string{"list"}},
		{Operation: sandbox.OpKill, Fault: transport, At: "kill", Existing: true, WantErr: unconfirmed, WantCalls: []string{"list", "kill"}},
		{Operation: sandbox.OpKill, Fault: cancel, At: "kill", Existing: true, WantErr: unconfirmed, WantCalls: []string{"list", "kill"}},
		{Operation: sandbox.OpKill, Fault: cleanup, At: "kill", Existing: true, WantErr: unconfirmed, WantCalls: []string{"list", "kill"}},
		{Operation: sandbox.OpKill, Fault: foreign, WantErr: nil, WantCalls: []string{"list", "list"}},

		{Operation: sandbox.OpRunCommand, Fault: transport, At: "list", Existing: true, WantErr: unavailable, WantCalls: []string{"list"}},
		{Operation: sandbox.OpRunCommand, Fault: transport, At: "get", Existing: true, WantErr: unavailable, WantCalls: []string{"list", "get"}},
		{Operation: sandbox.OpRunCommand, Fault: transport, At: "start", Existing: true, WantErr: command, WantCalls: []string{"list", "get", "start", "signal"}},
		{Operation: sandbox.OpRunCommand, Fault: cancel, At: "start", Existing: true, WantErr: command, WantCalls: []string{"list", "get", "start", "signal"}},
		{Operation: sandbox.OpRunCommand, Fault: FaultLostAnswer, At: "start", Existing: true, WantErr: command, WantCalls: []string{"list", "get", "start", "signal"}},
		{Operation: sandbox.OpRunCommand, Fault: foreign, WantErr: errdefs.ErrOwnership, WantCalls: []string{"list"}},
	}
}
