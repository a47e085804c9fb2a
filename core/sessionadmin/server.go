package sessionadmin

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/admin"
	"berth.dev/core/audit"
	"berth.dev/core/projects"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
)

// Server implements berth.admin.v1.SessionService and
// berth.admin.v1.AllocationService over one sessions.Service: the
// allocations are the Sessions' compute, read through the same logic and
// paged the same way.
type Server struct {
	// A method added to either service later answers UNIMPLEMENTED until
	// it is implemented here.
	adminv1.UnimplementedSessionServiceServer
	adminv1.UnimplementedAllocationServiceServer
	svc   *sessions.Service
	pages *admin.PageTokens
}

// New returns the SessionService and AllocationService over s. pages
// mints and checks the list calls' page tokens (its key must outlive
// restarts). It refuses a missing s or pages.
func New(s *sessions.Service, pages *admin.PageTokens) (*Server, error) {
	switch {
	case s == nil:
		return nil, errors.New("sessionadmin: no sessions service")
	case pages == nil:
		return nil, errors.New("sessionadmin: no page tokens")
	}
	return &Server{svc: s, pages: pages}, nil
}

// Register registers both services on s.
func (g *Server) Register(s *grpc.Server) {
	adminv1.RegisterSessionServiceServer(s, g)
	adminv1.RegisterAllocationServiceServer(s, g)
}

// CreateSession creates a Session in the project; Core places it and creates its sandbox in the background.
func (g *Server) CreateSession(ctx context.Context, req *adminv1.CreateSessionRequest) (*adminv1.CreateSessionResponse, error) {
	if err := admin.ValidateRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	if err := outputOnlyEmpty(req.GetSession()); err != nil {
		return nil, err
	}
	var tenant, project uuid.UUID
	if name := req.GetSession().GetProject(); name != "" {
		ids, err := admin.ValidateName("session.project", name, admin.ProjectName)
		if err != nil {
			return nil, err
		}
		tenant, project = uuid.MustParse(ids[0]), uuid.MustParse(ids[1])
	}
	b, err := g.svc.Create(ctx, admin.ScopeFrom(ctx), sessions.CreateRequest{
		RequestID:   uuid.MustParse(req.GetRequestId()),
		ProjectID:   project,
		TenantID:    tenant,
		DisplayName: req.GetSession().GetDisplayName(),
	})
	if err != nil {
		return nil, requestPaths.Map(err)
	}
	return &adminv1.CreateSessionResponse{Session: g.proto(ctx, b)}, nil
}

// proto maps one Session with its Runtime readiness; a failed readiness
// read reports no Runtime fact rather than failing the call, since the
// Session itself was read (and possibly changed) already.
func (g *Server) proto(ctx context.Context, b store.SessionBundle) *adminv1.Session {
	ready, err := g.svc.Readiness(ctx, b)
	if err != nil {
		return forCaller(ctx, sessionProto(b, store.RuntimeReadiness{}))
	}
	return forCaller(ctx, sessionProto(b, ready[b.Allocation.ID]))
}

// forCaller removes from s what only the administrator sees: the node and
// the allocation are the operator's infrastructure names, and a project
// key may not call NodeService or AllocationService.
func forCaller(ctx context.Context, s *adminv1.Session) *adminv1.Session {
	if !admin.PrincipalFrom(ctx).Admin() {
		s.Node, s.Allocation = "", ""
	}
	return s
}

// GetSession reads a Session with its Runtime readiness.
func (g *Server) GetSession(ctx context.Context, req *adminv1.GetSessionRequest) (*adminv1.GetSessionResponse, error) {
	id, err := parseID("name", req.GetName(), admin.SessionName)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Get(ctx, admin.ScopeFrom(ctx), id)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetSessionResponse{Session: g.proto(ctx, b)}, nil
}

// ListSessions lists Sessions in creation order.
func (g *Server) ListSessions(ctx context.Context, req *adminv1.ListSessionsRequest) (*adminv1.ListSessionsResponse, error) {
	scope, err := g.narrow(ctx, "project", req.GetProject())
	if err != nil {
		return nil, err
	}
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), sessionKeyset(g.svc, scope, req.GetProject(), req.GetShowDeleted()))
	if err != nil {
		return nil, err
	}
	ready, err := g.svc.Readiness(ctx, page...)
	if err != nil {
		return nil, err
	}
	return &adminv1.ListSessionsResponse{
		Sessions: admin.Protos(page, func(b store.SessionBundle) *adminv1.Session {
			return forCaller(ctx, sessionProto(b, ready[b.Allocation.ID]))
		}),
		NextPageToken: next,
	}, nil
}

// DeleteSession requests a Session's deletion.
func (g *Server) DeleteSession(ctx context.Context, req *adminv1.DeleteSessionRequest) (*adminv1.DeleteSessionResponse, error) {
	id, err := parseID("name", req.GetName(), admin.SessionName)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Delete(ctx, admin.ScopeFrom(ctx), id)
	if err != nil {
		return nil, err
	}
	return &adminv1.DeleteSessionResponse{Session: g.proto(ctx, b)}, nil
}

// SuspendSession requests a Session's suspension.
func (g *Server) SuspendSession(ctx context.Context, req *adminv1.SuspendSessionRequest) (*adminv1.SuspendSessionResponse, error) {
	id, requestID, err := computeRequest(req)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Suspend(ctx, admin.ScopeFrom(ctx), id, requestID)
	if err != nil {
		return nil, err
	}
	return &adminv1.SuspendSessionResponse{Session: g.proto(ctx, b)}, nil
}

// ResumeSession requests a suspended Session's restore.
func (g *Server) ResumeSession(ctx context.Context, req *adminv1.ResumeSessionRequest) (*adminv1.ResumeSessionResponse, error) {
	id, requestID, err := computeRequest(req)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Resume(ctx, admin.ScopeFrom(ctx), id, requestID)
	if err != nil {
		return nil, err
	}
	return &adminv1.ResumeSessionResponse{Session: g.proto(ctx, b)}, nil
}

// ForkSession makes new Sessions from a Session's filesystem.
func (g *Server) ForkSession(ctx context.Context, req *adminv1.ForkSessionRequest) (*adminv1.ForkSessionResponse, error) {
	fr, err := forkRequest(req)
	if err != nil {
		return nil, err
	}
	res, err := g.svc.Fork(ctx, admin.ScopeFrom(ctx), fr)
	if err != nil {
		return nil, err
	}
	out := forkProto(res)
	for _, c := range res.Children {
		out.Children = append(out.Children, g.proto(ctx, c))
	}
	return out, nil
}

// ArchiveSession archives a live Session.
func (g *Server) ArchiveSession(ctx context.Context, req *adminv1.ArchiveSessionRequest) (*adminv1.ArchiveSessionResponse, error) {
	id, err := parseID("name", req.GetName(), admin.SessionName)
	if err != nil {
		return nil, err
	}
	b, err := g.svc.Archive(ctx, admin.ScopeFrom(ctx), id, audit.From(ctx))
	if err != nil {
		return nil, err
	}
	return &adminv1.ArchiveSessionResponse{Session: g.proto(ctx, b)}, nil
}

// narrow is the caller's scope, limited to the project a list request's
// field names (empty: no filter).
func (g *Server) narrow(ctx context.Context, field, name string) (projects.Scope, error) {
	scope := admin.ScopeFrom(ctx)
	if name == "" {
		return scope, nil
	}
	ids, err := admin.ValidateName(field, name, admin.ProjectName)
	if err != nil {
		return projects.Scope{}, err
	}
	return g.svc.Narrow(ctx, scope, uuid.MustParse(ids[0]), uuid.MustParse(ids[1]))
}

// ListAllocations lists allocations in creation order.
func (g *Server) ListAllocations(ctx context.Context, req *adminv1.ListAllocationsRequest) (*adminv1.ListAllocationsResponse, error) {
	scope, err := g.narrow(ctx, "project", req.GetProject())
	if err != nil {
		return nil, err
	}
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), allocationKeyset(g.svc, scope, req.GetProject(), req.GetShowReleased()))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListAllocationsResponse{Allocations: admin.Protos(page, allocationProto), NextPageToken: next}, nil
}

// GetAllocation reads an allocation.
func (g *Server) GetAllocation(ctx context.Context, req *adminv1.GetAllocationRequest) (*adminv1.GetAllocationResponse, error) {
	id, err := parseID("name", req.GetName(), admin.AllocationName)
	if err != nil {
		return nil, err
	}
	a, err := g.svc.GetAllocation(ctx, id)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetAllocationResponse{Allocation: allocationProto(a)}, nil
}
