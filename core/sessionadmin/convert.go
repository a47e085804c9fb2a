package sessionadmin

import (
	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
)

// requestPaths maps the logic's field names to CreateSession's request
// paths.
var requestPaths = admin.FieldPaths{Renames: []admin.Rename{
	{From: "display_name", To: "session.display_name"},
	{From: "project", To: "session.project"},
	{From: "request_id", To: "request_id"},
}}

// outputOnlyEmpty refuses a CreateSession whose session sets an output
// only field, naming the field.
func outputOnlyEmpty(s *adminv1.Session) error {
	const reason = "is output only"
	switch {
	case s.GetName() != "":
		return errdefs.Invalid("session.name", reason)
	case s.GetState() != adminv1.Session_STATE_UNSPECIFIED:
		return errdefs.Invalid("session.state", reason)
	case s.GetCreateTime() != nil:
		return errdefs.Invalid("session.create_time", reason)
	case s.GetDeleteTime() != nil:
		return errdefs.Invalid("session.delete_time", reason)
	case s.GetEnvironment() != nil:
		return errdefs.Invalid("session.environment", reason)
	case s.GetNode() != "":
		return errdefs.Invalid("session.node", reason)
	case s.GetAllocation() != "":
		return errdefs.Invalid("session.allocation", reason)
	}
	return nil
}

// computeRequest parses a SuspendSession or ResumeSession request.
func computeRequest(req interface {
	GetName() string
	GetRequestId() string
}) (uuid.UUID, uuid.UUID, error) {
	id, err := parseID("name", req.GetName(), admin.SessionName)
	if err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	if err := admin.ValidateRequestID("request_id", req.GetRequestId()); err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	return id, uuid.MustParse(req.GetRequestId()), nil
}

// forkRequest parses a ForkSession request.
func forkRequest(req *adminv1.ForkSessionRequest) (sessions.ForkRequest, error) {
	id, requestID, err := computeRequest(req)
	if err != nil {
		return sessions.ForkRequest{}, err
	}
	return sessions.ForkRequest{
		SessionID: id, RequestID: requestID, Count: int(req.GetCount()), MinCount: int(req.GetMinCount()),
		DisplayNamePrefix: req.GetDisplayNamePrefix(),
	}, nil
}

// forkProto is the API form of a fork's answer, without its children
// (the server maps them with their Runtime readiness). A suspended
// source's capture time is its suspension's.
func forkProto(res store.ForkResult) *adminv1.ForkSessionResponse {
	f := res.Fork
	return &adminv1.ForkSessionResponse{
		Fork: "forks/" + f.ID.String(), Requested: int32(f.Requested), Placed: int32(f.Placed),
		UnplacedReason: f.UnplacedReason, CaptureTime: admin.Timestamp(f.CapturedAt),
	}
}

// parseID validates name against p and returns its one UUID id.
func parseID(field, name string, p admin.Pattern) (uuid.UUID, error) {
	ids, err := admin.ValidateName(field, name, p)
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.MustParse(ids[0]), nil
}

// sessionProto is the API form of a Session, with r the Runtime readiness
// of its allocation. Its state and Environment are what the logic derives
// (sessions.StateOf, sessions.EnvironmentOf).
func sessionProto(b store.SessionBundle, r store.RuntimeReadiness) *adminv1.Session {
	env := sessions.EnvironmentOf(b, r)
	out := &adminv1.Session{
		Name:        admin.SessionName.Format(b.Session.ID.String()),
		DisplayName: b.Session.DisplayName,
		State:       sessionState(sessions.StateOf(b)),
		CreateTime:  admin.Timestamp(&b.Session.CreatedAt),
		Project:     admin.ProjectName.Format(b.Session.TenantID.String(), b.Session.ProjectID.String()),
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
	sessions.StateArchived:     adminv1.Session_STATE_ARCHIVED,
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

// allocationProto is the API form of an allocation. It carries Berth
// names only: never the provider's native id, the device credential
// (digest or sealed), the device id or the create receipt. Node is empty for an allocation on the direct lane (store.DirectLane):
// a direct provider has no node.
func allocationProto(a store.SessionAllocation) *adminv1.Allocation {
	out := &adminv1.Allocation{
		Name:              admin.AllocationName.Format(a.ID.String()),
		Session:           admin.SessionName.Format(a.SessionID.String()),
		State:             allocationState(sessions.AllocationStateOf(a.Allocation)),
		Generation:        uint64(a.Generation),
		CreateSettled:     sessions.CreateSettled(a.Allocation),
		BootstrapComplete: a.BootstrapComplete,
		CreateTime:        admin.Timestamp(&a.CreatedAt),
		ReleaseTime:       admin.Timestamp(a.ReleasedAt),
		CreateFailed:      sessions.CreateFailed(a.Allocation),
		Abandoned:         a.AbandonedAt != nil,
		Project:           admin.ProjectName.Format(a.TenantID.String(), a.ProjectID.String()),
	}
	if a.NodeID != store.DirectLane {
		out.Node = admin.NodeName.Format(a.NodeID.String())
	}
	return out
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
