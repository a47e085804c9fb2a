package sessionadmin

import (
	"context"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// NewSessionServer returns s as berth.admin.v1.SessionService, for
// admin.Options.Sessions. It only converts: requests to s's arguments,
// its results to responses; it returns errors as they are (the admin
// server converts them once).
func NewSessionServer(s *Service) adminv1.SessionServiceServer {
	return &sessionServer{svc: s}
}

// NewAllocationServer returns s as berth.admin.v1.AllocationService, for
// admin.Options.Allocations.
func NewAllocationServer(s *Service) adminv1.AllocationServiceServer {
	return &allocationServer{svc: s}
}

type sessionServer struct {
	// A method added to SessionService later (ArchiveSession) answers
	// UNIMPLEMENTED until it is implemented here.
	adminv1.UnimplementedSessionServiceServer
	svc *Service
}

func (g *sessionServer) CreateSession(ctx context.Context, req *adminv1.CreateSessionRequest) (*adminv1.CreateSessionResponse, error) {
	if err := admin.ValidateRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	if err := outputOnlyEmpty(req.GetSession()); err != nil {
		return nil, err
	}
	b, err := g.svc.CreateSession(ctx, req.GetRequestId(), req.GetSession().GetDisplayName())
	if err != nil {
		return nil, err
	}
	return &adminv1.CreateSessionResponse{Session: g.proto(ctx, b)}, nil
}

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

// proto maps one Session with its Runtime readiness; a failed readiness
// read reports no Runtime fact rather than failing the call, since the
// Session itself was read (and possibly changed) already.
func (g *sessionServer) proto(ctx context.Context, b store.SessionBundle) *adminv1.Session {
	ready, err := g.svc.Readiness(ctx, b)
	if err != nil {
		return SessionProto(b, store.RuntimeReadiness{})
	}
	return SessionProto(b, ready[b.Allocation.ID])
}

func (g *sessionServer) GetSession(ctx context.Context, req *adminv1.GetSessionRequest) (*adminv1.GetSessionResponse, error) {
	b, err := g.svc.GetSession(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &adminv1.GetSessionResponse{Session: g.proto(ctx, b)}, nil
}

func (g *sessionServer) ListSessions(ctx context.Context, req *adminv1.ListSessionsRequest) (*adminv1.ListSessionsResponse, error) {
	page, next, err := g.svc.ListSessions(ctx, req.GetPageSize(), req.GetPageToken(), req.GetShowDeleted())
	if err != nil {
		return nil, err
	}
	resp := &adminv1.ListSessionsResponse{NextPageToken: next}
	ready, err := g.svc.Readiness(ctx, page...)
	if err != nil {
		return nil, err
	}
	for _, b := range page {
		resp.Sessions = append(resp.Sessions, SessionProto(b, ready[b.Allocation.ID]))
	}
	return resp, nil
}

func (g *sessionServer) DeleteSession(ctx context.Context, req *adminv1.DeleteSessionRequest) (*adminv1.DeleteSessionResponse, error) {
	b, err := g.svc.DeleteSession(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &adminv1.DeleteSessionResponse{Session: g.proto(ctx, b)}, nil
}

type allocationServer struct {
	adminv1.UnimplementedAllocationServiceServer
	svc *Service
}

func (g *allocationServer) ListAllocations(ctx context.Context, req *adminv1.ListAllocationsRequest) (*adminv1.ListAllocationsResponse, error) {
	page, next, err := g.svc.ListAllocations(ctx, req.GetPageSize(), req.GetPageToken(), req.GetShowReleased())
	if err != nil {
		return nil, err
	}
	resp := &adminv1.ListAllocationsResponse{NextPageToken: next}
	for _, a := range page {
		resp.Allocations = append(resp.Allocations, AllocationProto(a))
	}
	return resp, nil
}

func (g *allocationServer) GetAllocation(ctx context.Context, req *adminv1.GetAllocationRequest) (*adminv1.GetAllocationResponse, error) {
	a, err := g.svc.GetAllocation(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &adminv1.GetAllocationResponse{Allocation: AllocationProto(a)}, nil
}

// ComputeAvailable reports the Environment's compute_available: its
// unreleased allocation is running with settled creation (a matching
// resource with completed bootstrap was observed).
func ComputeAvailable(b store.SessionBundle) bool {
	a := b.Allocation
	return a.ID != uuid.Nil && a.State == store.AllocationRunning && a.CreateSettled
}

// SessionState is the API state of a Session as read:
//
//   - deletion requested, allocation released: DELETED;
//   - deletion requested, allocation still owned: DELETING;
//   - Environment recorded failed or expired: FAILED;
//   - compute available (ComputeAvailable): ACTIVE;
//   - otherwise PROVISIONING, also while a Create's outcome is unknown.
//
// A settled Create failure (allocation CREATE_FAILED) does not make the
// Session FAILED on its own: the failed allocation is cleaned up and
// released and the Environment, still pending, gets a new allocation on
// the same node (the Session stays PROVISIONING meanwhile). Only after
// store.MaxCreateAttempts settled failures does Core record the
// Environment failed (failure_code "create_failed"), which is FAILED.
func SessionState(b store.SessionBundle) adminv1.Session_State {
	switch {
	case b.Session.State == store.SessionDeleteRequested && b.Allocation.ID == uuid.Nil:
		return adminv1.Session_STATE_DELETED
	case b.Session.State == store.SessionDeleteRequested:
		return adminv1.Session_STATE_DELETING
	case b.Environment.State == store.EnvironmentFailed || b.Environment.State == store.EnvironmentExpired:
		return adminv1.Session_STATE_FAILED
	case ComputeAvailable(b):
		return adminv1.Session_STATE_ACTIVE
	}
	return adminv1.Session_STATE_PROVISIONING
}

// SessionProto is the API form of a Session, with r the Runtime readiness
// of its allocation. Each readiness fact has its own evidence and none is
// inferred from another: runtime_connected needs an open gateway
// connection under the current owner epoch, capabilities_prepared its
// preparation report, and execution_admitted both of those on an active
// Session with available compute.
func SessionProto(b store.SessionBundle, r store.RuntimeReadiness) *adminv1.Session {
	out := &adminv1.Session{
		Name:        admin.SessionName.Format(b.Session.ID.String()),
		DisplayName: b.Session.DisplayName,
		State:       SessionState(b),
		CreateTime:  timestamp(&b.Session.CreatedAt),
		DeleteTime:  timestamp(b.Session.DeleteRequestedAt),
		Environment: &adminv1.Environment{
			ComputeAvailable:     ComputeAvailable(b),
			RuntimeConnected:     r.Connected,
			CapabilitiesPrepared: r.Connected && r.Prepared,
			ExecutionAdmitted: r.Connected && r.Prepared && ComputeAvailable(b) &&
				b.Session.State == store.SessionActive,
			FailureCode: b.Environment.FailureCode,
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

// AllocationState is the API state of an allocation. create_failed (the
// provider's absence receipt, before its cleanup is requested) is
// CREATE_FAILED; afterwards the allocation is CLEANING_UP and then
// RELEASED like any other, and the API's create_failed field keeps the
// fact.
func AllocationState(a store.Allocation) adminv1.Allocation_State {
	switch a.State {
	case store.AllocationAllocated:
		return adminv1.Allocation_STATE_PENDING
	case store.AllocationRunning:
		if a.CreateSettled {
			return adminv1.Allocation_STATE_ACTIVE
		}
		return adminv1.Allocation_STATE_CREATING
	case store.AllocationCreateDispatched, store.AllocationCreateUnknown:
		return adminv1.Allocation_STATE_CREATING
	case store.AllocationCreateFailed:
		return adminv1.Allocation_STATE_CREATE_FAILED
	case store.AllocationCleanupRequested, store.AllocationCleanupUnknown, store.AllocationCleanupConfirmed:
		return adminv1.Allocation_STATE_CLEANING_UP
	case store.AllocationReleased:
		return adminv1.Allocation_STATE_RELEASED
	}
	return adminv1.Allocation_STATE_UNSPECIFIED
}

// CreateSettled reports the allocation's create_settled: the original
// Create can no longer change anything. That is settlement evidence (a
// running resource with completed bootstrap, or an absence receipt), or a
// Create never dispatched whose receipt is spent (cleanup requested
// first). A fresh receipt (allocated) may still be claimed, so it is not
// settled.
func CreateSettled(a store.Allocation) bool {
	if a.CreateDispatchedAt == nil {
		return a.State != store.AllocationAllocated
	}
	return a.CreateSettled || a.AbsenceReceipt
}

// AllocationProto is the API form of an allocation. It carries Berth
// names only: never the provider's native id, the device credential
// (digest or sealed), the device id or the create receipt.
func AllocationProto(a store.SessionAllocation) *adminv1.Allocation {
	return &adminv1.Allocation{
		Name:              admin.AllocationName.Format(a.ID.String()),
		Session:           admin.SessionName.Format(a.SessionID.String()),
		Node:              admin.NodeName.Format(a.NodeID.String()),
		State:             AllocationState(a.Allocation),
		Generation:        uint64(a.Generation),
		CreateSettled:     CreateSettled(a.Allocation),
		BootstrapComplete: a.BootstrapComplete,
		CreateTime:        timestamp(&a.CreatedAt),
		ReleaseTime:       timestamp(a.ReleasedAt),
		CreateFailed:      a.CreateDispatchedAt != nil && a.AbsenceReceipt,
	}
}

// timestamp converts t, leaving a nil or zero time unset.
func timestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(*t)
}
