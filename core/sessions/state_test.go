package sessions_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/sessions"
	"berth.dev/core/store"
)

func TestStateOf(t *testing.T) {
	alloc := func(s store.AllocationState, settled bool) store.Allocation {
		return store.Allocation{ID: uuid.New(), State: s, CreateSettled: settled}
	}
	bundle := func(s store.SessionState, e store.EnvironmentState, a store.Allocation) store.SessionBundle {
		return store.SessionBundle{
			Session:     store.Session{State: s},
			Environment: store.Environment{State: e},
			Allocation:  a,
		}
	}
	for name, c := range map[string]struct {
		b    store.SessionBundle
		want sessions.State
	}{
		"allocated":                    {bundle(store.SessionActive, store.EnvironmentPending, alloc(store.AllocationAllocated, false)), sessions.StateProvisioning},
		"outcome unknown":              {bundle(store.SessionActive, store.EnvironmentPending, alloc(store.AllocationCreateUnknown, false)), sessions.StateProvisioning},
		"running, bootstrap pending":   {bundle(store.SessionActive, store.EnvironmentPending, alloc(store.AllocationRunning, false)), sessions.StateProvisioning},
		"running and settled":          {bundle(store.SessionActive, store.EnvironmentReady, alloc(store.AllocationRunning, true)), sessions.StateActive},
		"create failed, not yet done":  {bundle(store.SessionActive, store.EnvironmentPending, alloc(store.AllocationCreateFailed, false)), sessions.StateProvisioning},
		"waiting for a new allocation": {bundle(store.SessionActive, store.EnvironmentPending, store.Allocation{}), sessions.StateProvisioning},
		"environment failed":           {bundle(store.SessionActive, store.EnvironmentFailed, store.Allocation{}), sessions.StateFailed},
		"environment expired":          {bundle(store.SessionActive, store.EnvironmentExpired, alloc(store.AllocationRunning, true)), sessions.StateFailed},
		"delete requested, owned":      {bundle(store.SessionDeleteRequested, store.EnvironmentReady, alloc(store.AllocationCleanupRequested, true)), sessions.StateDeleting},
		"delete requested, failed":     {bundle(store.SessionDeleteRequested, store.EnvironmentFailed, alloc(store.AllocationCleanupRequested, false)), sessions.StateDeleting},
		"delete requested, released":   {bundle(store.SessionDeleteRequested, store.EnvironmentReady, store.Allocation{}), sessions.StateDeleted},
		"archived, cleaning up":        {bundle(store.SessionArchived, store.EnvironmentExpired, alloc(store.AllocationCleanupRequested, true)), sessions.StateArchived},
		"archived, released":           {bundle(store.SessionArchived, store.EnvironmentExpired, store.Allocation{}), sessions.StateArchived},
		"archived, then deleted":       {bundle(store.SessionDeleteRequested, store.EnvironmentExpired, store.Allocation{}), sessions.StateDeleted},
		// A Session whose container went away is not provisioning again:
		// its Environment reports the compute unavailable.
		"observed stopped": {bundle(store.SessionActive, store.EnvironmentReady, store.Allocation{
			ID: uuid.New(), State: store.AllocationRunning, CreateSettled: true,
			Observation: store.Observation{At: new(time.Time), Compute: store.ObservedStopped, Reason: "compute_stopped"},
		}), sessions.StateActive},
	} {
		if got := sessions.StateOf(c.b); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func TestEnvironmentOf(t *testing.T) {
	running := store.SessionBundle{
		Session:    store.Session{State: store.SessionActive},
		Allocation: store.Allocation{ID: uuid.New(), State: store.AllocationRunning, CreateSettled: true},
	}
	unsettled := running
	unsettled.Allocation.CreateSettled = false
	deleting := running
	deleting.Session.State = store.SessionDeleteRequested
	failed := store.SessionBundle{Environment: store.Environment{State: store.EnvironmentFailed, FailureCode: store.FailureCreateFailed}}
	observed := func(c store.ObservedCompute, reason string) store.SessionBundle {
		b := running
		b.Allocation.Observation = store.Observation{At: new(time.Time), Compute: c, Reason: reason}
		return b
	}
	missingWhileDeleting := observed(store.ObservedMissing, "compute_missing")
	missingWhileDeleting.Allocation.State = store.AllocationCleanupRequested
	retention := time.Unix(1800000000, 0)
	suspended := running
	suspended.Allocation.ComputePhase = store.PhaseSuspended
	suspended.Allocation.Suspension.RetentionUntil = &retention
	quiescing := running
	quiescing.Allocation.ComputePhase = store.PhaseQuiescing
	connected := store.RuntimeReadiness{Connected: true, Generation: 1}
	prepared := store.RuntimeReadiness{Connected: true, Prepared: true, Generation: 1}
	for name, c := range map[string]struct {
		b    store.SessionBundle
		r    store.RuntimeReadiness
		want sessions.Environment
	}{
		"nothing established": {unsettled, store.RuntimeReadiness{}, sessions.Environment{}},
		"compute only":        {running, store.RuntimeReadiness{}, sessions.Environment{ComputeAvailable: true, ComputePhase: sessions.ComputeRunning}},
		"connected":           {running, connected, sessions.Environment{ComputeAvailable: true, RuntimeConnected: true, ComputePhase: sessions.ComputeRunning}},
		"admitted":            {running, prepared, sessions.Environment{ComputeAvailable: true, RuntimeConnected: true, CapabilitiesPrepared: true, ExecutionAdmitted: true, ComputePhase: sessions.ComputeRunning}},
		// Each fact needs its own evidence.
		"prepared without a connection": {running, store.RuntimeReadiness{Prepared: true}, sessions.Environment{ComputeAvailable: true, ComputePhase: sessions.ComputeRunning}},
		"prepared without compute":      {unsettled, prepared, sessions.Environment{RuntimeConnected: true, CapabilitiesPrepared: true}},
		"prepared while deleting":       {deleting, prepared, sessions.Environment{ComputeAvailable: true, RuntimeConnected: true, CapabilitiesPrepared: true, ComputePhase: sessions.ComputeRunning}},
		"failed":                        {failed, store.RuntimeReadiness{}, sessions.Environment{FailureCode: store.FailureCreateFailed}},
		// What the last observation found.
		"observed running":    {observed(store.ObservedRunning, "compute_running"), prepared, sessions.Environment{ComputeAvailable: true, RuntimeConnected: true, CapabilitiesPrepared: true, ExecutionAdmitted: true, ComputePhase: sessions.ComputeRunning}},
		"observed stopped":    {observed(store.ObservedStopped, "compute_stopped"), store.RuntimeReadiness{}, sessions.Environment{ComputeReason: "compute_stopped", ComputePhase: sessions.ComputeRunning}},
		"observed missing":    {observed(store.ObservedMissing, "compute_missing"), prepared, sessions.Environment{RuntimeConnected: true, CapabilitiesPrepared: true, ComputeReason: "compute_missing", ComputePhase: sessions.ComputeRunning}},
		"observation failed":  {observed(store.ObservedUnavailable, "observation_unavailable"), store.RuntimeReadiness{}, sessions.Environment{ComputeReason: "observation_unavailable", ComputePhase: sessions.ComputeRunning}},
		"missing, in cleanup": {missingWhileDeleting, store.RuntimeReadiness{}, sessions.Environment{}},
		// Suspended: no compute, with its phase and the retention deadline.
		"suspended": {suspended, prepared, sessions.Environment{RuntimeConnected: true, CapabilitiesPrepared: true,
			ComputeReason: sessions.ReasonSuspended, ComputePhase: sessions.ComputeSuspended, SnapshotExpiresAt: &retention}},
		// Quiescing is still running.
		"quiescing": {quiescing, prepared, sessions.Environment{ComputeAvailable: true, RuntimeConnected: true, CapabilitiesPrepared: true,
			ExecutionAdmitted: true, ComputePhase: sessions.ComputeRunning}},
	} {
		if got := sessions.EnvironmentOf(c.b, c.r); got != c.want {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

func TestAllocationStateOf(t *testing.T) {
	dispatched := new(time.Time)
	for name, c := range map[string]struct {
		a                     store.Allocation
		want                  sessions.AllocationState
		settled, createFailed bool
	}{
		"allocated":                 {store.Allocation{State: store.AllocationAllocated}, sessions.AllocationPending, false, false},
		"dispatched":                {store.Allocation{State: store.AllocationCreateDispatched, CreateDispatchedAt: dispatched}, sessions.AllocationCreating, false, false},
		"outcome unknown":           {store.Allocation{State: store.AllocationCreateUnknown, CreateDispatchedAt: dispatched}, sessions.AllocationCreating, false, false},
		"running, not settled":      {store.Allocation{State: store.AllocationRunning, CreateDispatchedAt: dispatched}, sessions.AllocationCreating, false, false},
		"running and settled":       {store.Allocation{State: store.AllocationRunning, CreateDispatchedAt: dispatched, CreateSettled: true}, sessions.AllocationActive, true, false},
		"absence receipt":           {store.Allocation{State: store.AllocationCreateFailed, CreateDispatchedAt: dispatched, AbsenceReceipt: true}, sessions.AllocationCreateFailed, true, true},
		"failed, cleaning up":       {store.Allocation{State: store.AllocationCleanupRequested, CreateDispatchedAt: dispatched, AbsenceReceipt: true}, sessions.AllocationCleaningUp, true, true},
		"cleanup unknown":           {store.Allocation{State: store.AllocationCleanupUnknown, CreateDispatchedAt: dispatched}, sessions.AllocationCleaningUp, false, false},
		"cleanup confirmed":         {store.Allocation{State: store.AllocationCleanupConfirmed, CreateDispatchedAt: dispatched, CreateSettled: true}, sessions.AllocationCleaningUp, true, false},
		"never dispatched, spent":   {store.Allocation{State: store.AllocationCleanupRequested}, sessions.AllocationCleaningUp, true, false},
		"failed and released":       {store.Allocation{State: store.AllocationReleased, CreateDispatchedAt: dispatched, AbsenceReceipt: true}, sessions.AllocationReleased, true, true},
		"never dispatched, release": {store.Allocation{State: store.AllocationReleased}, sessions.AllocationReleased, true, false},
		"a state of no meaning":     {store.Allocation{State: "bogus"}, sessions.AllocationStateUnknown, true, false},
		// An absence receipt proves a failed Create only for a Create
		// that was sent.
		"absence, never dispatched": {store.Allocation{State: store.AllocationCleanupRequested, AbsenceReceipt: true}, sessions.AllocationCleaningUp, true, false},
	} {
		if got := sessions.AllocationStateOf(c.a); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
		if got := sessions.CreateSettled(c.a); got != c.settled {
			t.Errorf("%s: create settled %t, want %t", name, got, c.settled)
		}
		if got := sessions.CreateFailed(c.a); got != c.createFailed {
			t.Errorf("%s: create failed %t, want %t", name, got, c.createFailed)
		}
	}
}
