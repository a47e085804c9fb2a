package sessionadmin

import (
	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/admin"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
)

// SessionProto is the API form of a Session, with r the Runtime readiness
// of its allocation. Its state and Environment are what the logic derives
// (sessions.StateOf, sessions.EnvironmentOf).
func SessionProto(b store.SessionBundle, r store.RuntimeReadiness) *adminv1.Session {
	env := sessions.EnvironmentOf(b, r)
	out := &adminv1.Session{
		Name:        admin.SessionName.Format(b.Session.ID.String()),
		DisplayName: b.Session.DisplayName,
		State:       sessionState(sessions.StateOf(b)),
		CreateTime:  admin.Timestamp(&b.Session.CreatedAt),
		DeleteTime:  admin.Timestamp(b.Session.DeleteRequestedAt),
		Environment: &adminv1.Environment{
			ComputeAvailable:     env.ComputeAvailable,
			RuntimeConnected:     env.RuntimeConnected,
			CapabilitiesPrepared: env.CapabilitiesPrepared,
			ExecutionAdmitted:    env.ExecutionAdmitted,
			FailureCode:          env.FailureCode,
			ComputeReason:        env.ComputeReason,
			ComputePhase:         computePhases[env.ComputePhase],
			SnapshotExpireTime:   admin.Timestamp(env.SnapshotExpiresAt),
		},
	}
	if b.Placement.NodeID != uuid.Nil {
		out.Node = admin.NodeName.Format(b.Placement.NodeID.String())
	}
	if b.Allocation.ID != uuid.Nil {
		out.Allocation = admin.AllocationName.Format(b.Allocation.ID.String())
	}
	return out
}

// sessionStates maps the logic's Session states to the API (anything else
// is STATE_UNSPECIFIED).
var sessionStates = map[sessions.State]adminv1.Session_State{
	sessions.StateProvisioning: adminv1.Session_STATE_PROVISIONING,
	sessions.StateActive:       adminv1.Session_STATE_ACTIVE,
	sessions.StateFailed:       adminv1.Session_STATE_FAILED,
	sessions.StateDeleting:     adminv1.Session_STATE_DELETING,
	sessions.StateDeleted:      adminv1.Session_STATE_DELETED,
}

func sessionState(s sessions.State) adminv1.Session_State { return sessionStates[s] }

// computePhases maps the logic's compute phases to the API ("":
// unspecified).
var computePhases = map[sessions.ComputePhase]adminv1.ComputePhase{
	sessions.ComputeRunning:    adminv1.ComputePhase_COMPUTE_PHASE_RUNNING,
	sessions.ComputeSuspending: adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDING,
	sessions.ComputeSuspended:  adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED,
	sessions.ComputeRestoring:  adminv1.ComputePhase_COMPUTE_PHASE_RESTORING,
}

// AllocationProto is the API form of an allocation. It carries Berth
// names only: never the provider's native id, the device credential
// (digest or sealed), the device id or the create receipt.
func AllocationProto(a store.SessionAllocation) *adminv1.Allocation {
	return &adminv1.Allocation{
		Name:              admin.AllocationName.Format(a.ID.String()),
		Session:           admin.SessionName.Format(a.SessionID.String()),
		Node:              admin.NodeName.Format(a.NodeID.String()),
		State:             allocationState(sessions.AllocationStateOf(a.Allocation)),
		Generation:        uint64(a.Generation),
		CreateSettled:     sessions.CreateSettled(a.Allocation),
		BootstrapComplete: a.BootstrapComplete,
		CreateTime:        admin.Timestamp(&a.CreatedAt),
		ReleaseTime:       admin.Timestamp(a.ReleasedAt),
		CreateFailed:      sessions.CreateFailed(a.Allocation),
		Abandoned:         a.AbandonedAt != nil,
	}
}

// allocationStates maps the logic's allocation states to the API.
var allocationStates = map[sessions.AllocationState]adminv1.Allocation_State{
	sessions.AllocationPending:      adminv1.Allocation_STATE_PENDING,
	sessions.AllocationCreating:     adminv1.Allocation_STATE_CREATING,
	sessions.AllocationActive:       adminv1.Allocation_STATE_ACTIVE,
	sessions.AllocationCreateFailed: adminv1.Allocation_STATE_CREATE_FAILED,
	sessions.AllocationCleaningUp:   adminv1.Allocation_STATE_CLEANING_UP,
	sessions.AllocationReleased:     adminv1.Allocation_STATE_RELEASED,
}

func allocationState(s sessions.AllocationState) adminv1.Allocation_State { return allocationStates[s] }
