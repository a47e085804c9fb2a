package projects

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

// Store is what the Service reads and writes: tenants and projects, their
// compare-and-set updates and soft deletions (store.Admin's writes,
// store.Reader's reads).
type Store interface {
	CreateTenant(ctx context.Context, requestID, id uuid.UUID, displayName string) (store.Tenant, bool, error)
	GetTenant(ctx context.Context, id uuid.UUID) (store.Tenant, error)
	ListTenantsByAge(ctx context.Context, limit int, after store.TenantCursor) ([]store.Tenant, error)
	UpdateTenant(ctx context.Context, id uuid.UUID, revision int64, displayName string) (store.Tenant, error)
	DeleteTenant(ctx context.Context, id uuid.UUID, revision int64) (store.Tenant, error)
	CreateProject(ctx context.Context, requestID, id, tenantID uuid.UUID, displayName string) (store.Project, bool, error)
	GetProject(ctx context.Context, id uuid.UUID) (store.Project, error)
	ListProjectsByAge(ctx context.Context, tenantID uuid.UUID, limit int, after store.ProjectCursor) ([]store.Project, error)
	UpdateProject(ctx context.Context, tenantID, id uuid.UUID, revision int64, displayName string) (store.Project, error)
	CreateProjectWithLimits(ctx context.Context, requestID, id, tenantID uuid.UUID, displayName string, limits store.ProjectLimits) (store.Project, bool, error)
	UpdateProjectFields(ctx context.Context, tenantID, id uuid.UUID, revision int64, c store.ProjectChanges) (store.Project, error)
	DeleteProject(ctx context.Context, tenantID, id uuid.UUID, revision int64) (store.Project, error)
}

// Service is the administrator's management of tenants and projects.
type Service struct {
	store Store
	newID func() uuid.UUID
}

// NewService returns the Service over st; newID makes the id of each new
// tenant and project. It refuses a missing st or newID.
func NewService(st Store, newID func() uuid.UUID) (*Service, error) {
	switch {
	case st == nil:
		return nil, errors.New("projects: no store")
	case newID == nil:
		return nil, errors.New("projects: no id source")
	}
	return &Service{store: st, newID: newID}, nil
}

// AnyRevision is the revision of an update or deletion that acts whatever
// the current revision is.
const AnyRevision = store.AnyRevision

// notFound is the answer for a missing, deleted or misparented tenant or
// project: one class and one form, whichever it was.
func notFound(kind string, id uuid.UUID) error {
	return fmt.Errorf("%s %s: %w", kind, id, errdefs.ErrNotFound)
}

// CreateTenant creates a tenant named displayName. It is idempotent by
// requestID: a retry returns the tenant the first call made.
func (s *Service) CreateTenant(ctx context.Context, requestID uuid.UUID, displayName string) (store.Tenant, error) {
	t, _, err := s.store.CreateTenant(ctx, requestID, s.newID(), displayName)
	return t, err
}

// GetTenant returns live tenant id; a deleted one is ErrNotFound.
func (s *Service) GetTenant(ctx context.Context, id uuid.UUID) (store.Tenant, error) {
	t, err := s.store.GetTenant(ctx, id)
	if err != nil {
		return store.Tenant{}, err
	}
	if t.DeletedAt != nil {
		return store.Tenant{}, notFound("tenant", id)
	}
	return t, nil
}

// ListTenants returns up to limit live tenants after cursor after, in
// creation order.
func (s *Service) ListTenants(ctx context.Context, after store.TenantCursor, limit int) ([]store.Tenant, error) {
	return s.store.ListTenantsByAge(ctx, limit, after)
}

// UpdateTenant renames live tenant id at revision (AnyRevision: any).
func (s *Service) UpdateTenant(ctx context.Context, id uuid.UUID, revision int64, displayName string) (store.Tenant, error) {
	return s.store.UpdateTenant(ctx, id, revision, displayName)
}

// DeleteTenant deletes live tenant id at revision (AnyRevision: any); it is
// refused while the tenant has live projects.
func (s *Service) DeleteTenant(ctx context.Context, id uuid.UUID, revision int64) (store.Tenant, error) {
	return s.store.DeleteTenant(ctx, id, revision)
}

// CreateProject creates a project named displayName in live tenant
// tenantID, idempotent by requestID as CreateTenant is.
func (s *Service) CreateProject(ctx context.Context, requestID, tenantID uuid.UUID, displayName string) (store.Project, error) {
	p, _, err := s.store.CreateProject(ctx, requestID, s.newID(), tenantID, displayName)
	return p, err
}

// GetProject returns live project id of tenant tenantID; a deleted one, or
// one of another tenant, is ErrNotFound, as a missing one.
func (s *Service) GetProject(ctx context.Context, tenantID, id uuid.UUID) (store.Project, error) {
	p, err := s.store.GetProject(ctx, id)
	if err != nil {
		return store.Project{}, err
	}
	if p.DeletedAt != nil || p.TenantID != tenantID {
		return store.Project{}, notFound("project", id)
	}
	return p, nil
}

// ListProjects returns up to limit live projects of live tenant tenantID
// after cursor after, in creation order; a missing or deleted tenant is
// ErrNotFound rather than an empty list.
func (s *Service) ListProjects(ctx context.Context, tenantID uuid.UUID, after store.ProjectCursor, limit int) ([]store.Project, error) {
	if _, err := s.GetTenant(ctx, tenantID); err != nil {
		return nil, err
	}
	return s.store.ListProjectsByAge(ctx, tenantID, limit, after)
}

// UpdateProject renames live project id of tenantID at revision
// (AnyRevision: any).
func (s *Service) UpdateProject(ctx context.Context, tenantID, id uuid.UUID, revision int64, displayName string) (store.Project, error) {
	return s.store.UpdateProject(ctx, tenantID, id, revision, displayName)
}

// DeleteProject deletes live project id of tenantID at revision
// (AnyRevision: any); it is refused while a Session of the project is not
// deleted with its compute released.
func (s *Service) DeleteProject(ctx context.Context, tenantID, id uuid.UUID, revision int64) (store.Project, error) {
	return s.store.DeleteProject(ctx, tenantID, id, revision)
}
