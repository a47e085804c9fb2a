package sessions

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/projects"
	"berth.dev/core/store"
)

// Get returns Session id with its Environment, placement and unreleased
// allocation; errdefs.ErrNotFound when there is none or scope does not
// see it (projects.GetSession). The reads return the store's errors,
// which name their operation.
func (s *Service) Get(ctx context.Context, scope projects.Scope, id uuid.UUID) (store.SessionBundle, error) {
	return projects.GetSession(ctx, s.store, scope, id)
}

// List returns up to limit Sessions of scope after the keyset position
// after (the zero cursor for the start) in creation order, ties by id; a
// deleted Session (deletion requested, allocation released) only with
// includeDeleted. A Session's position is Cursor(b). A one-project scope
// reads that project's own index, never a filter over every Session.
func (s *Service) List(ctx context.Context, scope projects.Scope, after store.AgeCursor, limit int, includeDeleted bool) ([]store.SessionBundle, error) {
	if err := scope.Check(); err != nil {
		return nil, err
	}
	if project, ok := scope.Project(); ok {
		return s.store.ListProjectSessionsByAge(ctx, project, limit, after, includeDeleted)
	}
	return s.store.ListSessionsByAge(ctx, limit, after, includeDeleted)
}

// Narrow limits scope to project of tenant, a caller's filter by project
// name (scope.Narrow): a project that does not exist, was deleted or is
// of another tenant narrows to projects.None, so a filtered list is empty
// and answers alike for each.
func (s *Service) Narrow(ctx context.Context, scope projects.Scope, tenant, project uuid.UUID) (projects.Scope, error) {
	if err := scope.Check(); err != nil {
		return projects.Scope{}, err
	}
	if !scope.Sees(project) {
		return projects.None(), nil
	}
	p, err := s.store.GetProject(ctx, project)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return projects.None(), nil
	case err != nil:
		return projects.Scope{}, err
	case p.DeletedAt != nil || p.TenantID != tenant:
		return projects.None(), nil
	}
	return scope.Narrow(project), nil
}

// Cursor is b's position in List's order.
func Cursor(b store.SessionBundle) store.AgeCursor {
	return store.AgeCursor{CreatedAt: b.Session.CreatedAt, ID: b.Session.ID}
}

// Readiness returns the Runtime readiness of the bundles' allocations, by
// allocation id; an allocation without an open connection is absent (the
// zero readiness: nothing established).
func (s *Service) Readiness(ctx context.Context, bundles ...store.SessionBundle) (map[uuid.UUID]store.RuntimeReadiness, error) {
	ids := make([]uuid.UUID, 0, len(bundles))
	for _, b := range bundles {
		if b.Allocation.ID != uuid.Nil {
			ids = append(ids, b.Allocation.ID)
		}
	}
	r, err := s.store.RuntimeReadiness(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("runtime readiness: %w", err)
	}
	return r, nil
}

// GetAllocation returns allocation id with its Session;
// errdefs.ErrNotFound when there is none.
func (s *Service) GetAllocation(ctx context.Context, id uuid.UUID) (store.SessionAllocation, error) {
	return s.store.GetSessionAllocation(ctx, id)
}

// ListAllocations returns up to limit allocations of scope's Sessions
// after the keyset position after (the zero cursor for the start) in
// creation order, ties by id; released ones only with includeReleased. An
// allocation's position is AllocationCursor(a).
func (s *Service) ListAllocations(ctx context.Context, scope projects.Scope, after store.AgeCursor, limit int, includeReleased bool) ([]store.SessionAllocation, error) {
	if err := scope.Check(); err != nil {
		return nil, err
	}
	if project, ok := scope.Project(); ok {
		return s.store.ListProjectAllocationsByAge(ctx, project, limit, after, includeReleased)
	}
	return s.store.ListAllocationsByAge(ctx, limit, after, includeReleased)
}

// AllocationCursor is a's position in ListAllocations' order.
func AllocationCursor(a store.SessionAllocation) store.AgeCursor {
	return store.AgeCursor{CreatedAt: a.CreatedAt, ID: a.ID}
}

// CountByState counts the Sessions whose deletion has not completed by
// their state as StateOf derives it (provisioning, active, failed,
// deleting, archived; a deleted Session is not counted): what berth-core's
// berth.sessions gauge reports. The store groups the Sessions by the facts
// StateOf reads, so this is one query whatever their number.
func (s *Service) CountByState(ctx context.Context) (map[State]int64, error) {
	rows, err := s.store.CountLiveSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := map[State]int64{}
	for _, r := range rows {
		b := store.SessionBundle{Session: store.Session{State: r.Session}, Environment: store.Environment{State: r.Environment}}
		if r.Allocation != "" {
			// StateOf asks only whether there is an unreleased allocation
			// (a non-nil id), and its state and settlement.
			b.Allocation = store.Allocation{ID: uuid.Max, State: r.Allocation, CreateSettled: r.CreateSettled}
		}
		out[StateOf(b)] += r.Sessions
	}
	return out, nil
}
