package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store/db"
)

// SuspensionCandidate is a running allocation whose Session has been idle
// for at least its generation's suspension idle time.
type SuspensionCandidate struct {
	Allocation
	// IdleSince is when the Session became idle (its last Turn submitted
	// or ended), by the database clock.
	IdleSince time.Time
}

// SuspensionScan is a page request of ListSuspensionCandidatesForNode.
type SuspensionScan struct {
	NodeID uuid.UUID
	// After is the keyset cursor (uuid.Nil for the start).
	After uuid.UUID
	// Limit is 1 to NodePageSize.
	Limit int
}

// ListSuspensionCandidatesForNode returns up to s.Limit suspension
// candidates of node s.NodeID with ids after s.After, in id order: running
// allocations with settled creation and no suspension phase, of an active
// Session whose Environment has not ended and whose device is not revoked,
// under a generation with a suspension policy, idle (session_idle_since,
// migration 0015) for at least the policy's idle time by the database
// clock. A candidate is only that: the Session-locked recheck
// (SessionIdleSince under the Session's lock) repeats the test before a
// suspension is armed. An empty page means the end.
func (s *Store) ListSuspensionCandidatesForNode(ctx context.Context, sc SuspensionScan) ([]SuspensionCandidate, error) {
	const op = "list suspension candidates for node"
	n, err := nodePageParam(op, sc.Limit)
	if err != nil {
		return nil, err
	}
	return fetchRows(op, func() ([]db.ListSuspensionCandidatesForNodeRow, error) {
		return s.q.ListSuspensionCandidatesForNode(ctx, db.ListSuspensionCandidatesForNodeParams{
			NodeID: sc.NodeID, After: sc.After, PageSize: n,
		})
	}, func(r db.ListSuspensionCandidatesForNodeRow) SuspensionCandidate {
		return SuspensionCandidate{Allocation: allocationFromRow(r.Allocation), IdleSince: r.IdleSince}
	})
}

// Idleness is a Session's idleness read with the database clock of the
// same read.
type Idleness struct {
	// Idle: at least one Turn ended and none is queued or running.
	Idle bool
	// Since is when it became idle (meaningful only when Idle).
	Since time.Time
	// ReadAt is the database clock at the read: Now - Since is the idle
	// time by elapsed database time, whatever Core's clock says.
	ReadAt time.Time
}

// IdleFor reports whether the Session has been idle for at least d.
func (i Idleness) IdleFor(d time.Duration) bool { return i.Idle && i.ReadAt.Sub(i.Since) >= d }

// SessionIdleSince reads a Session's idleness (session_idle_since). Read
// under the Session's lock, it is the recheck a suspension repeats before
// it is armed; keepalives, observations and Runtime connections never
// change it.
func (s *Store) SessionIdleSince(ctx context.Context, sessionID uuid.UUID) (Idleness, error) {
	r, err := s.q.SessionIdleSince(ctx, sessionID)
	if err != nil {
		return Idleness{}, wrap("session idle since", err)
	}
	return Idleness{Idle: r.Idle, Since: r.IdleSince, ReadAt: r.ReadAt}, nil
}
