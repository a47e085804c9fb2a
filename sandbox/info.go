package sandbox

import (
	"time"

	"berth.dev/sandbox/errdefs"
)

// State is a provider's observation of compute. Only StateRunning with the
// matching Reference and a native identity counts as running; other states
// are observations that never claim readiness.
type State string

// The compute states.
const (
	StateAbsent  State = "absent"
	StateCreated State = "created"
	StateRunning State = "running"
	StatePaused  State = "paused"
	StateStopped State = "stopped"
)

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool {
	switch s {
	case StateAbsent, StateCreated, StateRunning, StatePaused, StateStopped:
		return true
	}
	return false
}

// Info describes compute for one Reference. A failed call may return Info
// together with an error: keep that reference-bound settlement evidence
// without turning the failure into success.
type Info struct {
	Reference Reference
	// ProviderID is the native identity of the compute ("" when none).
	ProviderID string
	State      State
	// BootstrapComplete says the bootstrap reached its final mutating step.
	BootstrapComplete bool
	// CreateSettled proves the original Create attempt can no longer change
	// resources. It does not mean success.
	CreateSettled bool
	// LeaseExpiry is the native lease's end; zero for a backend without
	// leases. A provider never fabricates one.
	LeaseExpiry time.Time
}

// IsAbsenceReceipt reports whether info is an explicit creation-absence
// receipt for ref: state absent, the matching Reference, CreateSettled, and
// no native ID or completed bootstrap. Nothing else proves that an
// in-flight Create cannot appear later.
func (i Info) IsAbsenceReceipt(ref Reference) bool {
	return i.Reference == ref && i.State == StateAbsent && i.CreateSettled &&
		i.ProviderID == "" && !i.BootstrapComplete
}

// IsSettledRunning reports whether info settles creation for ref from a
// matching running resource with a completed bootstrap.
func (i Info) IsSettledRunning(ref Reference) bool {
	return i.Reference == ref && i.State == StateRunning && i.ProviderID != "" && i.BootstrapComplete
}

// CheckFor rejects an Info that contradicts itself or names another
// Reference. The zero Info (nothing observed) is accepted. Core and the
// node transport run it on every Info a provider returns.
func (i Info) CheckFor(ref Reference) error {
	if i == (Info{}) {
		return nil
	}
	if i.Reference != ref {
		return errdefs.Invalid("info.reference", "does not match the requested reference")
	}
	if i.State != "" && !i.State.Valid() {
		return errdefs.Invalid("info.state", "unknown state")
	}
	if i.State == StateAbsent && (i.ProviderID != "" || i.BootstrapComplete) {
		return errdefs.Invalid("info.state", "absent compute cannot carry a native id or a completed bootstrap")
	}
	if i.BootstrapComplete && i.ProviderID == "" {
		return errdefs.Invalid("info.bootstrap_complete", "requires a native id")
	}
	return nil
}
