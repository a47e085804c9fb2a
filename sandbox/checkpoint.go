package sandbox

import (
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

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

// SeededCreateRequest is a Create whose filesystem starts as a copy of a
// snapshot instead of empty: a fork's child. Create is the child's own
// request (its Reference, Resources and a Bootstrap carrying its own
// device credential); Snapshot is a snapshot of Owner (the fork's source),
// which the adapter copies and keeps. The copy's Runtime state that
// belongs to the source (its bootstrap file and CA, a park marker and a
// wake file) never reaches the child: the child's Runtime starts fresh and
// authenticates as the child. Everything else is Create's contract: one
// attempt per create receipt, the same settlement evidence, and Kill of
// the child removes what the attempt made and never the snapshot.
type SeededCreateRequest struct {
	Create   CreateRequest
	Owner    Reference
	Snapshot SnapshotIdentity
}

// Validate checks the request before any native call.
func (r SeededCreateRequest) Validate() error {
	if err := r.Create.Validate(); err != nil {
		return err
	}
	if err := r.Owner.Validate(); err != nil {
		return errdefs.Invalid("owner", "is not a valid allocation reference")
	}
	if r.Owner == r.Create.Reference {
		return errdefs.Invalid("owner", "must be another allocation than the one created")
	}
	if r.Snapshot.ID == "" || r.Snapshot.Provenance == "" {
		return errdefs.Invalid("snapshot", "is required")
	}
	return nil
}

// ImportRequest asks ImportSnapshot for a snapshot of Owner under a
// Core-persisted OperationID, from an archive ExportSnapshot wrote on
// another node: a fork's seed, so that children on that node are created
// from a local copy (CreateSeeded). Unlike a capture, an import has no
// effect outside its own snapshot, so it is idempotent by operation: a
// repeat of a completed import returns the same snapshot without reading
// the archive, and a repeat after an incomplete one removes what it left
// and imports again (never a second snapshot). With Discard it removes
// everything the operation made, complete or not, confirms it absent and
// reads nothing: Core discards a seed once its fork no longer needs it.
type ImportRequest struct {
	Owner       Reference
	OperationID string
	Discard     bool
	// Via is an allocation of the importing node the seed is made for (a
	// fork's child there). Owner is another node's allocation, so Core's
	// node proxy addresses the call with Via (its node and generation);
	// adapters do not use it. Zero: addressed with Owner.
	Via Reference
}

// Validate checks the request before any native call.
func (r ImportRequest) Validate() error {
	if err := r.Owner.Validate(); err != nil {
		return err
	}
	if r.OperationID == "" {
		return errdefs.Invalid("operation_id", "is required")
	}
	return nil
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
