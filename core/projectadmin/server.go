package projectadmin

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/projects"
)

// New returns berth.admin.v1.ProjectService over svc (tenants and
// projects) and keys (project keys). pages mints and checks the list
// calls' page tokens (its key must outlive restarts). It refuses a missing
// svc, keys or pages.
func New(svc *projects.Service, keys *projects.Keys, pages *admin.PageTokens) (*Server, error) {
	switch {
	case svc == nil:
		return nil, errors.New("projectadmin: no project service")
	case keys == nil:
		return nil, errors.New("projectadmin: no key service")
	case pages == nil:
		return nil, errors.New("projectadmin: no page tokens")
	}
	return &Server{svc: svc, keys: keys, pages: pages}, nil
}

// Register registers the service on s.
func (g *Server) Register(s *grpc.Server) { adminv1.RegisterProjectServiceServer(s, g) }

// Server implements berth.admin.v1.ProjectService.
type Server struct {
	adminv1.UnimplementedProjectServiceServer
	svc   *projects.Service
	keys  *projects.Keys
	pages *admin.PageTokens
}

// CreateTenant creates a tenant, idempotent by request_id.
func (g *Server) CreateTenant(ctx context.Context, req *adminv1.CreateTenantRequest) (*adminv1.CreateTenantResponse, error) {
	id, err := requestID(req.GetRequestId())
	if err != nil {
		return nil, err
	}
	if err := tenantOutputOnlyEmpty(req.GetTenant()); err != nil {
		return nil, err
	}
	t, err := g.svc.CreateTenant(ctx, id, req.GetTenant().GetDisplayName())
	if err != nil {
		return nil, tenantPaths.Map(err)
	}
	return &adminv1.CreateTenantResponse{Tenant: tenantProto(t)}, nil
}

// GetTenant reads a live tenant.
func (g *Server) GetTenant(ctx context.Context, req *adminv1.GetTenantRequest) (*adminv1.GetTenantResponse, error) {
	id, err := tenantID("name", req.GetName())
	if err != nil {
		return nil, err
	}
	t, err := g.svc.GetTenant(ctx, id)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetTenantResponse{Tenant: tenantProto(t)}, nil
}

// ListTenants lists live tenants, oldest first.
func (g *Server) ListTenants(ctx context.Context, req *adminv1.ListTenantsRequest) (*adminv1.ListTenantsResponse, error) {
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), tenantKeyset(g.svc))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListTenantsResponse{Tenants: admin.Protos(page, tenantProto), NextPageToken: next}, nil
}

// UpdateTenant renames a tenant, at its etag when one is given.
func (g *Server) UpdateTenant(ctx context.Context, req *adminv1.UpdateTenantRequest) (*adminv1.UpdateTenantResponse, error) {
	id, err := tenantID("tenant.name", req.GetTenant().GetName())
	if err != nil {
		return nil, err
	}
	if err := displayNameMask(req.GetUpdateMask()); err != nil {
		return nil, err
	}
	revision, err := parseEtag("etag", req.GetEtag())
	if err != nil {
		return nil, err
	}
	t, err := g.svc.UpdateTenant(ctx, id, revision, req.GetTenant().GetDisplayName())
	if err != nil {
		return nil, tenantPaths.Map(err)
	}
	return &adminv1.UpdateTenantResponse{Tenant: tenantProto(t)}, nil
}

// DeleteTenant deletes a tenant without live projects.
func (g *Server) DeleteTenant(ctx context.Context, req *adminv1.DeleteTenantRequest) (*adminv1.DeleteTenantResponse, error) {
	id, err := tenantID("name", req.GetName())
	if err != nil {
		return nil, err
	}
	revision, err := parseEtag("etag", req.GetEtag())
	if err != nil {
		return nil, err
	}
	t, err := g.svc.DeleteTenant(ctx, id, revision)
	if err != nil {
		return nil, tenantPaths.Map(err)
	}
	return &adminv1.DeleteTenantResponse{Tenant: tenantProto(t)}, nil
}

// CreateProject creates a project of a live tenant, idempotent by
// request_id.
func (g *Server) CreateProject(ctx context.Context, req *adminv1.CreateProjectRequest) (*adminv1.CreateProjectResponse, error) {
	tenant, err := tenantID("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	id, err := requestID(req.GetRequestId())
	if err != nil {
		return nil, err
	}
	if err := projectOutputOnlyEmpty(req.GetProject()); err != nil {
		return nil, err
	}
	p, err := g.svc.CreateProjectWithLimits(ctx, id, tenant, req.GetProject().GetDisplayName(), projectLimits(req.GetProject().GetLimits()))
	if err != nil {
		return nil, projectPaths.Map(err)
	}
	return &adminv1.CreateProjectResponse{Project: projectProto(p)}, nil
}

// GetProject reads a live project of the named tenant.
func (g *Server) GetProject(ctx context.Context, req *adminv1.GetProjectRequest) (*adminv1.GetProjectResponse, error) {
	tenant, id, err := projectID("name", req.GetName())
	if err != nil {
		return nil, err
	}
	p, err := g.svc.GetProject(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetProjectResponse{Project: projectProto(p)}, nil
}

// ListProjects lists a live tenant's live projects, oldest first.
func (g *Server) ListProjects(ctx context.Context, req *adminv1.ListProjectsRequest) (*adminv1.ListProjectsResponse, error) {
	tenant, err := tenantID("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), projectKeyset(g.svc, tenant))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListProjectsResponse{Projects: admin.Protos(page, projectProto), NextPageToken: next}, nil
}

// UpdateProject renames a project or changes its limits, at its etag
// when one is given.
func (g *Server) UpdateProject(ctx context.Context, req *adminv1.UpdateProjectRequest) (*adminv1.UpdateProjectResponse, error) {
	tenant, id, err := projectID("project.name", req.GetProject().GetName())
	if err != nil {
		return nil, err
	}
	changes, err := projectChanges(req.GetUpdateMask(), req.GetProject())
	if err != nil {
		return nil, err
	}
	revision, err := parseEtag("etag", req.GetEtag())
	if err != nil {
		return nil, err
	}
	p, err := g.svc.UpdateProjectFields(ctx, tenant, id, revision, changes)
	if err != nil {
		return nil, projectPaths.Map(err)
	}
	return &adminv1.UpdateProjectResponse{Project: projectProto(p)}, nil
}

// DeleteProject deletes a project whose Sessions are all deleted and
// released.
func (g *Server) DeleteProject(ctx context.Context, req *adminv1.DeleteProjectRequest) (*adminv1.DeleteProjectResponse, error) {
	tenant, id, err := projectID("name", req.GetName())
	if err != nil {
		return nil, err
	}
	revision, err := parseEtag("etag", req.GetEtag())
	if err != nil {
		return nil, err
	}
	p, err := g.svc.DeleteProject(ctx, tenant, id, revision)
	if err != nil {
		return nil, projectPaths.Map(err)
	}
	return &adminv1.DeleteProjectResponse{Project: projectProto(p)}, nil
}

// CreateProjectKey creates a key of a live project; its token is in the
// first response only.
func (g *Server) CreateProjectKey(ctx context.Context, req *adminv1.CreateProjectKeyRequest) (*adminv1.CreateProjectKeyResponse, error) {
	tenant, project, err := projectID("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	id, err := requestID(req.GetRequestId())
	if err != nil {
		return nil, err
	}
	if err := keyOutputOnlyEmpty(req.GetKey()); err != nil {
		return nil, err
	}
	nk := projects.NewKey{RequestID: id, TenantID: tenant, ProjectID: project, DisplayName: req.GetKey().GetDisplayName()}
	if e := req.GetKey().GetExpireTime(); e != nil {
		if err := e.CheckValid(); err != nil {
			return nil, errdefs.Invalid("key.expire_time", "must be a valid timestamp")
		}
		t := e.AsTime()
		nk.ExpireAt = &t
	}
	k, token, err := g.keys.Create(ctx, nk)
	if err != nil {
		return nil, keyPaths.Map(err)
	}
	return &adminv1.CreateProjectKeyResponse{Key: keyProto(k), Token: token.Reveal()}, nil
}

// ListProjectKeys lists a project's keys in creation order.
func (g *Server) ListProjectKeys(ctx context.Context, req *adminv1.ListProjectKeysRequest) (*adminv1.ListProjectKeysResponse, error) {
	tenant, project, err := projectID("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), keyKeyset(g.keys, tenant, project))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListProjectKeysResponse{Keys: admin.Protos(page, keyProto), NextPageToken: next}, nil
}

// RevokeProjectKey revokes a key for good.
func (g *Server) RevokeProjectKey(ctx context.Context, req *adminv1.RevokeProjectKeyRequest) (*adminv1.RevokeProjectKeyResponse, error) {
	ids, err := admin.ValidateName("name", req.GetName(), admin.ProjectKeyName)
	if err != nil {
		return nil, err
	}
	k, err := g.keys.Revoke(ctx, uuid.MustParse(ids[0]), uuid.MustParse(ids[1]), uuid.MustParse(ids[2]))
	if err != nil {
		return nil, err
	}
	return &adminv1.RevokeProjectKeyResponse{Key: keyProto(k)}, nil
}
