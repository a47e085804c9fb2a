package sessions

import (
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// State is a Session's state as its records prove it.
type State int

// The Session states (StateOf).
const (
	StateProvisioning State = iota + 1
	StateActive
	StateFailed
	StateDeleting
	StateDeleted
	StateArchived
)

func (s State) String() string {
	switch s {
	case StateProvisioning:
		return "provisioning"
	case StateActive:
		return "active"
	case StateFailed:
		return "failed"
	case StateDeleting:
		return "deleting"
	case StateDeleted:
		return "deleted"
	case StateArchived:
		return "archived"
	}
	return "unspecified"
}

// StateOf is the state of the Session b as read:
//
//   - deletion requested, allocation released: StateDeleted;
//   - deletion requested, allocation still owned: StateDeleting;
//   - archived (and not deleted since): StateArchived, whatever its
//     compute's cleanup (the Environment's facts report it);
//   - Environment recorded failed or expired: StateFailed;
//   - compute created (running allocation with settled creation):
//     StateActive, also when the last observation found it stopped or
//     missing (ComputeAvailable and ComputeReason report that: a Session
//     whose container went away is not provisioning again);
//   - otherwise StateProvisioning, also while a Create's outcome is
//     unknown.
//
// A settled Create failure (allocation create_failed) does not make the
// Session failed on its own: the failed allocation is cleaned up and
// released and the Environment, still pending, gets a new allocation on
// the same node (the Session stays provisioning meanwhile). Only after
// store.MaxCreateAttempts settled failures does Core record the
// Environment failed (failure code store.FailureCreateFailed), which is
// StateFailed.
func StateOf(b store.SessionBundle) State {
	switch {
	case b.Session.State == store.SessionDeleteRequested && b.Allocation.ID == uuid.Nil:
		return StateDeleted
	case b.Session.State == store.SessionDeleteRequested:
		return StateDeleting
	case b.Session.State == store.SessionArchived:
		return StateArchived
	case b.Environment.State == store.EnvironmentFailed || b.Environment.State == store.EnvironmentExpired:
		return StateFailed
	case computeCreated(b.Allocation):
		return StateActive
	}
	return StateProvisioning
}

// ComputeAvailable reports whether the Session's compute is available:
// its unreleased allocation is running with settled creation (a matching
// resource with completed bootstrap was observed) and the lifecycle
// worker's last observation of it, if any, found it running. A stopped or
// missing container, or a failed last observation, makes it unavailable
// (ComputeReason says why) until an observation finds it running again.
func ComputeAvailable(b store.SessionBundle) bool {
	a := b.Allocation
	return computeCreated(a) && !suspended(a) && (a.Observation.At == nil || a.Observation.Compute == store.ObservedRunning)
}

// ReasonSuspended is ComputeReason while the compute is captured,
// suspended or being restored (ComputePhaseOf).
const ReasonSuspended = "compute_suspended"

// suspended: a's compute is being captured, is suspended or is being
// restored.
func suspended(a store.Allocation) bool {
	switch a.ComputePhase {
	case store.PhaseSuspending, store.PhaseSuspended, store.PhaseRestoring:
		return true
	}
	return false
}

// ComputePhase is where a Session's compute is in the suspension cycle,
// as the API reports it: quiescing (the Runtime closing admission before
// a capture) is still running.
type ComputePhase string

// The reported compute phases; "" while no compute was created.
const (
	ComputeRunning    ComputePhase = "running"
	ComputeSuspending ComputePhase = "suspending"
	ComputeSuspended  ComputePhase = "suspended"
	ComputeRestoring  ComputePhase = "restoring"
)

// ComputePhaseOf is the compute phase of Session b: "" unless its compute
// was created.
func ComputePhaseOf(b store.SessionBundle) ComputePhase {
	a := b.Allocation
	if !computeCreated(a) {
		return ""
	}
	switch a.ComputePhase {
	case store.PhaseSuspending:
		return ComputeSuspending
	case store.PhaseSuspended:
		return ComputeSuspended
	case store.PhaseRestoring:
		return ComputeRestoring
	}
	return ComputeRunning
}

// computeCreated: a's creation settled with a running resource and its
// cleanup was not requested.
func computeCreated(a store.Allocation) bool {
	return a.ID != uuid.Nil && a.State == store.AllocationRunning && a.CreateSettled
}

// ComputeReason is the fixed code of why the running allocation's compute
// is not available: the reason its last observation recorded
// (lifecycle.ReasonStopped, ReasonMissing, ...) when that observation did
// not find it running. It is empty while compute is available, and for a
// Session whose compute was never created or is being cleaned up (its
// state says so).
func ComputeReason(b store.SessionBundle) string {
	a := b.Allocation
	switch {
	case !computeCreated(a):
		return ""
	case suspended(a):
		return ReasonSuspended
	case a.Observation.At == nil || a.Observation.Compute == store.ObservedRunning:
		return ""
	}
	return a.Observation.Reason
}

// Environment is what the records prove about a Session's Environment.
type Environment struct {
	// ComputeAvailable: see ComputeAvailable.
	ComputeAvailable bool
	// RuntimeConnected: an open gateway connection under the current
	// owner epoch.
	RuntimeConnected bool
	// CapabilitiesPrepared: that connection reported its preparation.
	CapabilitiesPrepared bool
	// ExecutionAdmitted: connected and prepared, on an active
	// (undeleted) Session with available compute.
	ExecutionAdmitted bool
	// FailureCode is the recorded reason of a failed Environment; empty
	// otherwise.
	FailureCode string
	// ComputeReason: see ComputeReason.
	ComputeReason string
	// ComputePhase: see ComputePhaseOf.
	ComputePhase ComputePhase
	// SnapshotExpiresAt is, while suspended or restoring, the end of the
	// snapshot's retention.
	SnapshotExpiresAt *time.Time
}

// EnvironmentOf is the Environment of the Session b, with r the Runtime
// readiness of its allocation (Service.Readiness; the zero readiness when
// it has none). Each fact has its own evidence and none is inferred from
// another.
func EnvironmentOf(b store.SessionBundle, r store.RuntimeReadiness) Environment {
	compute := ComputeAvailable(b)
	return Environment{
		ComputeAvailable:     compute,
		RuntimeConnected:     r.Connected,
		CapabilitiesPrepared: r.Connected && r.Prepared,
		ExecutionAdmitted:    r.Connected && r.Prepared && compute && b.Session.State == store.SessionActive,
		FailureCode:          b.Environment.FailureCode,
		ComputeReason:        ComputeReason(b),
		ComputePhase:         ComputePhaseOf(b),
		SnapshotExpiresAt:    snapshotExpiry(b.Allocation),
	}
}

// snapshotExpiry is the retention deadline of a's snapshot while it is
// suspended or restoring.
func snapshotExpiry(a store.Allocation) *time.Time {
	if !computeCreated(a) || (a.ComputePhase != store.PhaseSuspended && a.ComputePhase != store.PhaseRestoring) {
		return nil
	}
	return a.Suspension.RetentionUntil
}

// AllocationState is an allocation's state as its record proves it.
type AllocationState int

// The allocation states (AllocationStateOf). AllocationStateUnknown is a
// recorded state this logic does not know.
const (
	AllocationStateUnknown AllocationState = iota
	AllocationPending
	AllocationCreating
	AllocationActive
	AllocationCreateFailed
	AllocationCleaningUp
	AllocationReleased
)

func (s AllocationState) String() string {
	switch s {
	case AllocationPending:
		return "pending"
	case AllocationCreating:
		return "creating"
	case AllocationActive:
		return "active"
	case AllocationCreateFailed:
		return "create_failed"
	case AllocationCleaningUp:
		return "cleaning_up"
	case AllocationReleased:
		return "released"
	}
	return "unknown"
}

// AllocationStateOf is the state of allocation a. The provider's absence
// receipt, before its cleanup is requested, is AllocationCreateFailed;
// afterwards the allocation is cleaning up and then released like any
// other, and CreateFailed keeps the fact.
func AllocationStateOf(a store.Allocation) AllocationState {
	switch a.State {
	case store.AllocationAllocated:
		return AllocationPending
	case store.AllocationRunning:
		if a.CreateSettled {
			return AllocationActive
		}
		return AllocationCreating
	case store.AllocationCreateDispatched, store.AllocationCreateUnknown:
		return AllocationCreating
	case store.AllocationCreateFailed:
		return AllocationCreateFailed
	case store.AllocationCleanupRequested, store.AllocationCleanupUnknown, store.AllocationCleanupConfirmed:
		return AllocationCleaningUp
	case store.AllocationReleased:
		return AllocationReleased
	}
	return AllocationStateUnknown
}

// CreateSettled reports whether a's original Create can no longer change
// anything. That is settlement evidence (a running resource with
// completed bootstrap, or an absence receipt), or a Create never
// dispatched whose receipt is spent (cleanup requested first). A fresh
// receipt (allocated) may still be claimed, so it is not settled.
func CreateSettled(a store.Allocation) bool {
	if a.CreateDispatchedAt == nil {
		return a.State != store.AllocationAllocated
	}
	return a.CreateSettled || a.AbsenceReceipt
}

// CreateFailed reports whether a's dispatched Create settled without a
// resource (the provider's absence receipt). The fact outlives the
// allocation's cleanup and release.
func CreateFailed(a store.Allocation) bool {
	return a.CreateDispatchedAt != nil && a.AbsenceReceipt
}
