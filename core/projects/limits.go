package projects

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// CreateProjectWithLimits is CreateProject with the project's limits
// (store.ProjectLimits; nil is no limit). A retry with other limits is
// ALREADY_EXISTS, as one with another display name.
func (s *Service) CreateProjectWithLimits(ctx context.Context, requestID, tenantID uuid.UUID, displayName string, limits store.ProjectLimits) (store.Project, error) {
	p, _, err := s.store.CreateProjectWithLimits(ctx, requestID, s.newID(), tenantID, displayName, limits)
	return p, err
}

// UpdateProjectFields changes live project id of tenantID at revision
// (AnyRevision: whatever it is): its display name and limits as c says,
// in one revision. Lowering a limit below what the project holds evicts
// nothing.
func (s *Service) UpdateProjectFields(ctx context.Context, tenantID, id uuid.UUID, revision int64, c store.ProjectChanges) (store.Project, error) {
	return s.store.UpdateProjectFields(ctx, tenantID, id, revision, c)
}
