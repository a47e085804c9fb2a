package sessionadmin

import (
	"context"
	"errors"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
)

// NewSessionServer returns s as berth.admin.v1.SessionService, for
// admin.Options.Sessions. tenant is the tenant id every Session created
// through the admin API belongs to: the admin API has no tenant field, so
// Core passes its one default tenant. pages mints and checks ListSessions'
// page tokens (its key must outlive restarts).
func NewSessionServer(s *sessions.Service, tenant uuid.UUID, pages *admin.PageTokens) (adminv1.SessionServiceServer, error) {
	switch {
	case s == nil:
		return nil, errors.New("sessionadmin: no sessions service")
	case pages == nil:
		return nil, errors.New("sessionadmin: no page tokens")
	case tenant == uuid.Nil:
		return nil, errors.New("sessionadmin: no tenant id")
	}
	return &sessionServer{svc: s, tenant: tenant, pages: pages}, nil
}

// NewAllocationServer returns s as berth.admin.v1.AllocationService, for
// admin.Options.Allocations. pages mints and checks ListAllocations' page
// tokens.
func NewAllocationServer(s *sessions.Service, pages *admin.PageTokens) (adminv1.AllocationServiceServer, error) {
	switch {
	case s == nil:
		return nil, errors.New("sessionadmin: no sessions service")
	case pages == nil:
		return nil, errors.New("sessionadmin: no page tokens")
	}
	return &allocationServer{svc: s, pages: pages}, nil
}

// requestPaths maps the logic's field names to CreateSession's request
// paths.
var requestPaths = admin.FieldPaths{Renames: []admin.Rename{
	{From: "display_name", To: "session.display_name"},
	{From: "request_id", To: "request_id"},
}}

type sessionServer struct {
	// A method added to SessionService later (ArchiveSession) answers
	// UNIMPLEMENTED until it is implemented here.
	adminv1.UnimplementedSessionServiceServer
	svc    *sessions.Service
	tenant uuid.UUID
	pages  *admin.PageTokens
}

func (g *sessionServer) CreateSession(ctx context.Context, req *adminv1.CreateSessionRequest) (*adminv1.CreateSessionResponse, error) {
	if err := admin.ValidateRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	if err := outputOnlyEmpty(req.GetSession()); err != nil {
		return nil, err
	}
	b, err := g.svc.Create(ctx, sessions.CreateRequest{
		RequestID:   uuid.MustParse(req.GetRequestId()),
		TenantID:    g.tenant,
		DisplayName: req.GetSession().GetDisplayName(),
	})
	if err != nil {
		return nil, requestPaths.Map(err)
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
	id, err := parseID("name", req.GetName(), admin.SessionName)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetSessionResponse{Session: g.proto(ctx, b)}, nil
}

func (g *sessionServer) ListSessions(ctx context.Context, req *adminv1.ListSessionsRequest) (*adminv1.ListSessionsResponse, error) {
	showDeleted := req.GetShowDeleted()
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), admin.Keyset[store.SessionBundle, store.AgeCursor]{
		Scope: []string{scopeListSessions, admin.FlagScope("show_deleted", showDeleted)},
		Fetch: func(ctx context.Context, after store.AgeCursor, limit int) ([]store.SessionBundle, error) {
			return g.svc.List(ctx, after, limit, showDeleted)
		},
		Cursor:   func(b store.SessionBundle) ([]byte, error) { return encodeCursor(sessions.Cursor(b)), nil },
		Position: decodeCursor,
	})
	if err != nil {
		return nil, err
	}
	ready, err := g.svc.Readiness(ctx, page...)
	if err != nil {
		return nil, err
	}
	return &adminv1.ListSessionsResponse{
		Sessions: admin.Protos(page, func(b store.SessionBundle) *adminv1.Session {
			return SessionProto(b, ready[b.Allocation.ID])
		}),
		NextPageToken: next,
	}, nil
}

func (g *sessionServer) DeleteSession(ctx context.Context, req *adminv1.DeleteSessionRequest) (*adminv1.DeleteSessionResponse, error) {
	id, err := parseID("name", req.GetName(), admin.SessionName)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Delete(ctx, id)
	if err != nil {
		return nil, err
	}
	return &adminv1.DeleteSessionResponse{Session: g.proto(ctx, b)}, nil
}

func (g *sessionServer) SuspendSession(ctx context.Context, req *adminv1.SuspendSessionRequest) (*adminv1.SuspendSessionResponse, error) {
	id, requestID, err := computeRequest(req)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Suspend(ctx, id, requestID)
	if err != nil {
		return nil, err
	}
	return &adminv1.SuspendSessionResponse{Session: g.proto(ctx, b)}, nil
}

func (g *sessionServer) ResumeSession(ctx context.Context, req *adminv1.ResumeSessionRequest) (*adminv1.ResumeSessionResponse, error) {
	id, requestID, err := computeRequest(req)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Resume(ctx, id, requestID)
	if err != nil {
		return nil, err
	}
	return &adminv1.ResumeSessionResponse{Session: g.proto(ctx, b)}, nil
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

type allocationServer struct {
	adminv1.UnimplementedAllocationServiceServer
	svc   *sessions.Service
	pages *admin.PageTokens
}

func (g *allocationServer) ListAllocations(ctx context.Context, req *adminv1.ListAllocationsRequest) (*adminv1.ListAllocationsResponse, error) {
	showReleased := req.GetShowReleased()
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), admin.Keyset[store.SessionAllocation, store.AgeCursor]{
		Scope: []string{scopeListAllocations, admin.FlagScope("show_released", showReleased)},
		Fetch: func(ctx context.Context, after store.AgeCursor, limit int) ([]store.SessionAllocation, error) {
			return g.svc.ListAllocations(ctx, after, limit, showReleased)
		},
		Cursor: func(a store.SessionAllocation) ([]byte, error) {
			return encodeCursor(sessions.AllocationCursor(a)), nil
		},
		Position: decodeCursor,
	})
	if err != nil {
		return nil, err
	}
	return &adminv1.ListAllocationsResponse{Allocations: admin.Protos(page, AllocationProto), NextPageToken: next}, nil
}

func (g *allocationServer) GetAllocation(ctx context.Context, req *adminv1.GetAllocationRequest) (*adminv1.GetAllocationResponse, error) {
	id, err := parseID("name", req.GetName(), admin.AllocationName)
	if err != nil {
		return nil, err
	}
	a, err := g.svc.GetAllocation(ctx, id)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetAllocationResponse{Allocation: AllocationProto(a)}, nil
}

// parseID validates name against p and returns its one UUID id.
func parseID(field, name string, p admin.Pattern) (uuid.UUID, error) {
	ids, err := admin.ValidateName(field, name, p)
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.MustParse(ids[0]), nil
}
