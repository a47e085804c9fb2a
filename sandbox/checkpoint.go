package sandbox

import "berth.dev/runtimebootstrap"

// Compute is one exact compute incarnation of an allocation. Cleanup and
// commands target the incarnation, never whatever instance now has the same
// name.
type Compute struct {
	Reference  Reference
	Generation uint64
	Name       string
	ID         string
}

// ComputeState is the observed state of one incarnation.
type ComputeState string

// The compute incarnation states.
const (
	ComputeAbsent  ComputeState = "absent"
	ComputeRunning ComputeState = "running"
	ComputePaused  ComputeState = "paused"
	ComputeStopped ComputeState = "stopped"
)

// ComputeInfo is an observation of one incarnation.
type ComputeInfo struct {
	Compute Compute
	State   ComputeState
	// AbsenceReceipt (with State absent and no native id) is the
	// incarnation's explicit absence receipt: its name is claimed, so no
	// attempt to restore into it can make it any more (KillCompute of an
	// incarnation whose native id Core never learned places the claim).
	// An absent observation without it is only a missing observation.
	AbsenceReceipt bool
}

// SnapshotIdentity names a captured snapshot. Core persists ID and
// Provenance exactly as the provider returned them.
type SnapshotIdentity struct {
	ID         string
	Provenance string
}

// SuspendRequest captures Compute under a Core-persisted operation ID.
// ObserveOnly observes the previous attempt with that ID and never starts
// another capture. It answers the complete snapshot, or ErrNotFound when
// the provider read that the operation has no complete snapshot (nothing
// made, or an incomplete capture): Core thaws the source and rolls the
// suspension back only on that answer. Any other error observed nothing.
type SuspendRequest struct {
	Compute     Compute
	OperationID string
	ObserveOnly bool
}

// SuspendResult is a capture's outcome.
type SuspendResult struct {
	Snapshot SnapshotIdentity
	Source   ComputeInfo
}

// CaptureRequest captures Compute's filesystem (its home and its
// environment) into a snapshot under a Core-persisted operation ID, like
// SuspendRequest, but the source is kept: a running source is paused only
// for the copy and thawed (unpaused, never cold-started) before Capture
// returns, and a paused or stopped source is captured as it is and left as
// it was. Fork needs this: the source Session keeps its Runtime and its
// Turns while its children are seeded from the snapshot.
//
// An operation captures at most once: a repeat of a completed Capture
// returns the same snapshot, and a repeat after an attempt of unknown
// outcome is refused with ErrComputeUnconfirmed (never retried by the
// adapter). ObserveOnly only observes the previous attempt (the
// snapshot's completion record) and never starts a copy: it answers the
// complete snapshot, ErrNotFound when the provider read that the operation
// has no complete snapshot, or any other error when it observed nothing.
type CaptureRequest struct {
	Compute     Compute
	OperationID string
	ObserveOnly bool
}

// CaptureResult is a Capture's outcome: the snapshot, and the source as
// observed once the Capture is over, so Core can check that the source it
// keeps is still the same incarnation in the state it had before (a
// running source runs again).
type CaptureResult struct {
	Snapshot SnapshotIdentity
	Source   ComputeInfo
}

// ResumeRequest restores Snapshot into the Target incarnation under a
// Core-persisted operation ID, with the deployment's Resources and a fresh
// Runtime Bootstrap (a restored Runtime starts anew and authenticates
// again). ObserveOnly observes the previous attempt and never starts
// another restore; it needs neither Resources nor Bootstrap. An attempt
// makes at most one native instance of Target: once an observation has
// named that instance (its ID), KillCompute of it, by that ID, leaves the
// attempt nothing that can run. ErrNotFound (or an absent state) is only
// a missing observation: the attempt may still make its instance.
type ResumeRequest struct {
	Snapshot    SnapshotIdentity
	Target      Compute
	OperationID string
	ObserveOnly bool
	Resources   Resources
	Bootstrap   runtimebootstrap.File
	// CoreCA is CreateRequest.CoreCA for the restored incarnation.
	CoreCA []byte
}

// ResumeResult is a restore's outcome.
type ResumeResult struct {
	Compute ComputeInfo
}
