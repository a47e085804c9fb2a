package sessionadmin

import (
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

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
		CreateTime:  timestamp(&b.Session.CreatedAt),
		DeleteTime:  timestamp(b.Session.DeleteRequestedAt),
		Environment: &adminv1.Environment{
			ComputeAvailable:     env.ComputeAvailable,
			RuntimeConnected:     env.RuntimeConnected,
			CapabilitiesPrepared: env.CapabilitiesPrepared,
			ExecutionAdmitted:    env.ExecutionAdmitted,
			FailureCode:          env.FailureCode,
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

func sessionState(s sessions.State) adminv1.Session_State {
	switch s {
	case sessions.StateProvisioning:
		return adminv1.Session_STATE_PROVISIONING
	case sessions.StateActive:
		return adminv1.Session_STATE_ACTIVE
	case sessions.StateFailed:
		return adminv1.Session_STATE_FAILED
	case sessions.StateDeleting:
		return adminv1.Session_STATE_DELETING
	case sessions.StateDeleted:
		return adminv1.Session_STATE_DELETED
	}
	return adminv1.Session_STATE_UNSPECIFIED
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
		CreateTime:        timestamp(&a.CreatedAt),
		ReleaseTime:       timestamp(a.ReleasedAt),
		CreateFailed:      sessions.CreateFailed(a.Allocation),
	}
}

func allocationState(s sessions.AllocationState) adminv1.Allocation_State {
	switch s {
	case sessions.AllocationPending:
		return adminv1.Allocation_STATE_PENDING
	case sessions.AllocationCreating:
		return adminv1.Allocation_STATE_CREATING
	case sessions.AllocationActive:
		return adminv1.Allocation_STATE_ACTIVE
	case sessions.AllocationCreateFailed:
		return adminv1.Allocation_STATE_CREATE_FAILED
	case sessions.AllocationCleaningUp:
		return adminv1.Allocation_STATE_CLEANING_UP
	case sessions.AllocationReleased:
		return adminv1.Allocation_STATE_RELEASED
	}
	return adminv1.Allocation_STATE_UNSPECIFIED
}

// timestamp converts t, leaving a nil or zero time unset.
func timestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(*t)
}
