package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store/db"
)

// PlacementState is the state of an Environment's placement on a node.
type PlacementState string

// The placement states. An unreleased placement (reserved or active) is a
// capacity reservation on its node.
const (
	// PlacementReserved: committed with the Session; no compute observed.
	PlacementReserved PlacementState = "reserved"
	// PlacementActive: the allocation's compute was observed running.
	PlacementActive PlacementState = "active"
	// PlacementReleased: the allocation was released (cleanup confirmed,
	// creation settled); final.
	PlacementReleased PlacementState = "released"
)

// Placement binds an Environment to the node the store chose for it. It
// never moves to another node.
type Placement struct {
	EnvironmentID uuid.UUID
	NodeID        uuid.UUID
	Generation    int64
	State         PlacementState
	CreatedAt     time.Time
	ReleasedAt    *time.Time
}

// GetPlacement returns the placement of an Environment; ErrNotFound when
// there is none.
func (s *Reader) GetPlacement(ctx context.Context, environmentID uuid.UUID) (Placement, error) {
	row, err := s.q.GetPlacement(ctx, environmentID)
	if err != nil {
		return Placement{}, wrap("get placement", err)
	}
	return placementFromRow(row), nil
}

// NodeHeld returns how many Environments node nodeID holds actively:
// unreleased placements (reservations) or unreleased allocations
// (unresolved resources), except the suspended ones (NodeRetained). This
// is the count CreateSession and a restore compare with max_active.
func (s *Reader) NodeHeld(ctx context.Context, nodeID uuid.UUID) (int64, error) {
	n, err := s.q.CountNodeHeld(ctx, nodeID)
	if err != nil {
		return 0, wrap("count node held", err)
	}
	return n, nil
}

// NodeRetained counts the Environments node nodeID holds only as a
// snapshot (suspended), which max_retained bounds.
func (s *Reader) NodeRetained(ctx context.Context, nodeID uuid.UUID) (int64, error) {
	n, err := s.q.CountNodeRetained(ctx, nodeID)
	if err != nil {
		return 0, wrap("count node retained", err)
	}
	return n, nil
}

// NodeHolds reports whether node nodeID holds anything: an unreleased
// placement or an unreleased allocation, unknown creations and pending
// cleanup included. Node removal must be refused while it does. A false
// answer for a node that is no longer enabled stays false: placement only
// chooses enabled nodes, and holdings of other nodes only shrink.
func (s *Reader) NodeHolds(ctx context.Context, nodeID uuid.UUID) (bool, error) {
	holds, err := s.q.NodeHolds(ctx, nodeID)
	if err != nil {
		return false, wrap("node holds", err)
	}
	return holds, nil
}

func placementFromRow(r db.Placement) Placement {
	return Placement{
		EnvironmentID: r.EnvironmentID,
		NodeID:        laneOf(r.NodeID),
		Generation:    r.Generation,
		State:         PlacementState(r.State),
		CreatedAt:     r.CreatedAt,
		ReleasedAt:    r.ReleasedAt,
	}
}
