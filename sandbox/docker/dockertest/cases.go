package dockertest

import (
	"slices"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
)

// ContractCases is the Docker adapter's fault table for
// contracttest.RunFailures: under each fault, the error class and the exact
// native calls the adapter makes. It is the same wherever the adapter runs,
// in-process or behind a node agent.
func ContractCases() []contracttest.Case {
	const (
		cInspect, cCreate, cArchive = CallContainerInspect, CallContainerCreate, CallContainerArchive
		cStart, cRemove             = CallContainerStart, CallContainerRemove
		vInspect, vCreate, vRemove  = CallVolumeInspect, CallVolumeCreate, CallVolumeRemove
		eCreate, eStart, eInspect   = CallExecCreate, CallExecStart, CallExecInspect
		cList, vList                = CallContainerList, CallVolumeList
	)
	T, C := contracttest.FaultTransport, contracttest.FaultCancelAfterDispatch
	F, X := contracttest.FaultForeignOwnership, contracttest.FaultCleanupFailure
	unconfirmed, unobserved := errdefs.ErrComputeUnconfirmed, errdefs.ErrObservationUnavailable
	pre := []string{cInspect, vInspect, vInspect}
	upTo := func(calls ...string) []string { return append(append([]string{}, pre...), calls...) }
	full := upTo(vCreate, vCreate, cCreate, cInspect, cArchive, cArchive, cStart)
	// Kill lists the allocation's other incarnations and snapshots first
	// (none here), then checks the first incarnation's three names.
	killChecks := []string{cList, vList, cInspect, vInspect, vInspect}
	cases := []contracttest.Case{
		{Operation: sandbox.OpCreate, Fault: T, At: vCreate, WantErr: unconfirmed, WantCalls: upTo(vCreate)},
		{Operation: sandbox.OpCreate, Fault: T, At: cCreate, WantErr: unconfirmed, WantCalls: upTo(vCreate, vCreate, cCreate)},
		{Operation: sandbox.OpCreate, Fault: T, At: cArchive, WantErr: unconfirmed, WantCalls: upTo(vCreate, vCreate, cCreate, cInspect, cArchive)},
		{Operation: sandbox.OpCreate, Fault: T, At: cStart, WantErr: unconfirmed, WantCalls: full},
		{Operation: sandbox.OpCreate, Fault: C, At: cCreate, WantErr: unconfirmed, WantCalls: upTo(vCreate, vCreate, cCreate)},
		{Operation: sandbox.OpCreate, Fault: C, At: cStart, WantErr: unconfirmed, WantCalls: full},
		{Operation: sandbox.OpCreate, Fault: X, At: cCreate, WantErr: unconfirmed, WantCalls: upTo(vCreate, vCreate, cCreate)},
		{Operation: sandbox.OpCreate, Fault: X, At: cStart, WantErr: unconfirmed, WantCalls: full},
		{Operation: sandbox.OpCreate, Fault: F, WantErr: errdefs.ErrOwnership, WantAbsenceReceipt: true, WantCalls: []string{cInspect}},

		{Operation: sandbox.OpGetInfo, Fault: T, At: cInspect, Existing: true, WantErr: unobserved, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpGetInfo, Fault: C, At: cInspect, Existing: true, WantErr: unobserved, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpGetInfo, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},

		{Operation: sandbox.OpRenew, Fault: T, At: cInspect, Existing: true, WantErr: unconfirmed, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpRenew, Fault: C, At: cInspect, Existing: true, WantErr: unconfirmed, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpRenew, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},

		{Operation: sandbox.OpKill, Fault: T, At: cList, Existing: true, WantErr: unconfirmed, WantCalls: []string{cList}},
		{Operation: sandbox.OpKill, Fault: T, At: cInspect, Existing: true, WantErr: unconfirmed, WantCalls: []string{cList, vList, cInspect}},
		{Operation: sandbox.OpKill, Fault: T, At: cRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove)},
		{Operation: sandbox.OpKill, Fault: C, At: cRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove)},
		{Operation: sandbox.OpKill, Fault: C, At: vRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove, vRemove)},
		{Operation: sandbox.OpKill, Fault: X, At: cRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove)},
		{Operation: sandbox.OpKill, Fault: X, At: vRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove, vRemove)},
		// Every name foreign-held: nothing owned to clean up, nothing
		// touched.
		{Operation: sandbox.OpKill, Fault: F, WantErr: nil, WantCalls: killChecks},
		// No container: Kill claims the names with a tombstone; a lost
		// answer to that create is unknown and never resent.
		{Operation: sandbox.OpKill, Fault: T, At: cCreate, WantErr: unconfirmed, WantCalls: append(killChecks, cCreate)},
		{Operation: sandbox.OpKill, Fault: C, At: cCreate, WantErr: unconfirmed, WantCalls: append(killChecks, cCreate)},

		{Operation: sandbox.OpRunCommand, Fault: T, At: eCreate, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{cInspect, eCreate}},
		{Operation: sandbox.OpRunCommand, Fault: T, At: eStart, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{cInspect, eCreate, eStart}},
		{Operation: sandbox.OpRunCommand, Fault: C, At: eStart, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{cInspect, eCreate, eStart}},
		{Operation: sandbox.OpRunCommand, Fault: T, At: eInspect, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{cInspect, eCreate, eStart, eInspect}},
		{Operation: sandbox.OpRunCommand, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},
	}
	return cases
}

// CheckpointCases is the Docker adapter's checkpoint fault table for
// contracttest.RunCheckpointFailures: under each fault, the error class
// and the exact native calls.
func CheckpointCases() []contracttest.CheckpointCase {
	const (
		cInspect, cCreate, cRemove = CallContainerInspect, CallContainerCreate, CallContainerRemove
		cPause, cUnpause, cStart   = CallContainerPause, CallContainerUnpause, CallContainerStart
		read, write                = CallArchiveRead, CallContainerArchive
		vInspect, vCreate          = CallVolumeInspect, CallVolumeCreate
	)
	T, C := contracttest.FaultTransport, contracttest.FaultCancelAfterDispatch
	F, X := contracttest.FaultForeignOwnership, contracttest.FaultCleanupFailure
	running, paused, stopped, suspended := contracttest.SetupRunning, contracttest.SetupPaused, contracttest.SetupStopped, contracttest.SetupSuspended
	unconfirmed := errdefs.ErrComputeUnconfirmed
	// Suspend checks the holder's and the capture container's names, reads
	// the source and checks the snapshot's volume names, then pauses,
	// creates the capture container and copies /home and /environment.
	suspend := []string{cInspect, cInspect, cInspect, vInspect, vInspect, cPause}
	capture := []string{cPause, cCreate, write}
	// Resume reads the holder, checks the target's three names, creates
	// its volumes and container, checks the limits, copies the snapshot,
	// writes the fresh bootstrap and starts.
	resume := []string{cInspect, cInspect, vInspect, vInspect, vCreate, vCreate, cCreate}
	return []contracttest.CheckpointCase{
		{Operation: sandbox.OpSuspend, Setup: running, Fault: T, At: cPause, WantErr: unconfirmed, WantCalls: suspend},
		{Operation: sandbox.OpSuspend, Setup: running, Fault: T, At: read, WantErr: unconfirmed, NeverAgain: capture,
			WantCalls: append(slices.Clone(suspend), cCreate, read)},
		{Operation: sandbox.OpSuspend, Setup: running, Fault: C, At: write, WantErr: unconfirmed, NeverAgain: capture,
			WantCalls: append(slices.Clone(suspend), cCreate, read, write)},
		// A foreign holder under the snapshot's name: refused at once.
		{Operation: sandbox.OpSuspend, Setup: running, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpResume, Setup: suspended, Fault: T, At: cCreate, WantErr: unconfirmed, WantCalls: resume},
		{Operation: sandbox.OpResume, Setup: suspended, Fault: C, At: cStart, WantErr: unconfirmed,
			WantCalls: append(slices.Clone(resume), cInspect, read, write, read, write, write, cStart)},
		{Operation: sandbox.OpResumeCompute, Setup: paused, WantCalls: []string{cInspect, cUnpause, cInspect}},
		{Operation: sandbox.OpResumeCompute, Setup: stopped, WantErr: errdefs.ErrRuntimeNotRunning, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpKillCompute, Setup: running, Fault: X, At: cRemove, WantErr: unconfirmed,
			WantCalls: []string{cInspect, vInspect, vInspect, cRemove}},
		// DeleteSnapshot reads the holder, the capture container and a
		// Capture's copier, then the two volumes, then removes.
		{Operation: sandbox.OpDeleteSnapshot, Setup: suspended, Fault: X, At: cRemove, WantErr: unconfirmed,
			WantCalls: []string{cInspect, cInspect, cInspect, vInspect, vInspect, cRemove}},
		{Operation: sandbox.OpDeleteSnapshot, Setup: running, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},
	}
}
