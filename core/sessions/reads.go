package sessions

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// Get returns Session id with its Environment, placement and unreleased
// allocation; errdefs.ErrNotFound when there is none. The reads return the
// store's errors, which name their operation.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (store.SessionBundle, error) {
	return s.store.GetSession(ctx, id)
}

// List returns up to limit Sessions after the keyset position after (the
// zero cursor for the start) in creation order, ties by id; a deleted
// Session (deletion requested, allocation released) only with
// includeDeleted. A Session's position is Cursor(b).
func (s *Service) List(ctx context.Context, after store.AgeCursor, limit int, includeDeleted bool) ([]store.SessionBundle, error) {
	return s.store.ListSessionsByAge(ctx, limit, after, includeDeleted)
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

// ListAllocations returns up to limit allocations after the keyset
// position after (the zero cursor for the start) in creation order, ties
// by id; released ones only with includeReleased. An allocation's
// position is AllocationCursor(a).
func (s *Service) ListAllocations(ctx context.Context, after store.AgeCursor, limit int, includeReleased bool) ([]store.SessionAllocation, error) {
	return s.store.ListAllocationsByAge(ctx, limit, after, includeReleased)
}

// AllocationCursor is a's position in ListAllocations' order.
func AllocationCursor(a store.SessionAllocation) store.AgeCursor {
	return store.AgeCursor{CreatedAt: a.CreatedAt, ID: a.ID}
}

// CountByState counts the Sessions whose deletion has not completed by
// their state as StateOf derives it (provisioning, active, failed,
// deleting; a deleted Session is not counted): what berth-core's
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
