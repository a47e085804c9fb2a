package store

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// ObservedCompute is what an observation of running compute found (see
// migrations/0010_allocation_observation.sql).
type ObservedCompute string

// The observed compute states. Only ObservedRunning is evidence that the
// compute is available; none of them authorizes cleanup, and
// ObservedMissing is only a missing observation, never proof of absence.
const (
	ObservedRunning     ObservedCompute = "running"
	ObservedStopped     ObservedCompute = "stopped"
	ObservedMissing     ObservedCompute = "missing"
	ObservedUnavailable ObservedCompute = "unavailable"
)

// Valid reports whether c is one of the observed compute states.
func (c ObservedCompute) Valid() bool {
	switch c {
	case ObservedRunning, ObservedStopped, ObservedMissing, ObservedUnavailable:
		return true
	}
	return false
}

// Observation is the last observation of an allocation's running compute.
// At is the database time it was recorded (nil before the first);
// KeepaliveAt the database time of the last keepalive the provider
// confirmed (nil before the first).
type Observation struct {
	At          *time.Time
	Compute     ObservedCompute
	Reason      string
	KeepaliveAt *time.Time
}

func observationFromRow(r db.Allocation) Observation {
	return Observation{
		At:          r.ObservedAt,
		Compute:     ObservedCompute(r.ObservedCompute.String),
		Reason:      r.ObservedReason.String,
		KeepaliveAt: r.KeepaliveAt,
	}
}

var reasonCode = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// RecordObservationParams is one observation of allocation ID's compute,
// made after reading the allocation at Revision. Keepalive says the
// observation is the Info of a keepalive (Renew) the provider confirmed.
type RecordObservationParams struct {
	ID       uuid.UUID
	Revision int64
	Compute  ObservedCompute
	// Reason is a fixed code (lower case, digits and underscores), never a
	// provider's message.
	Reason    string
	Keepalive bool
}

// RecordObservation records p at the database time, fenced by the owner
// epoch (ErrSuperseded) and by the revision the observer read: it is
// ErrFenced unless the allocation is still running at p.Revision, so an
// observation never lands on an allocation whose cleanup was requested (or
// that otherwise moved on) while the provider was being asked. It changes
// neither the allocation's state nor its revision, and it authorizes
// nothing: it is evidence for what the Session API reports and for the
// Turn sweep. ErrNotFound when there is no such allocation; ErrInvalid for
// an unknown state or a malformed reason, and for a keepalive whose
// observation is not running (a keepalive is confirmed only by running
// compute).
func (s *Owner) RecordObservation(ctx context.Context, p RecordObservationParams) (Allocation, error) {
	const op = "record observation"
	switch {
	case !p.Compute.Valid():
		return Allocation{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("compute", "unknown observed state"))
	case !reasonCode.MatchString(p.Reason):
		return Allocation{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("reason", "must be a fixed code"))
	case p.Keepalive && p.Compute != ObservedRunning:
		return Allocation{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("keepalive", "only running compute confirms a keepalive"))
	}
	var out Allocation
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		row, err := q.RecordObservation(ctx, db.RecordObservationParams{
			ID: p.ID, Revision: p.Revision, ObservedCompute: string(p.Compute),
			ObservedReason: p.Reason, Keepalive: p.Keepalive,
		})
		out, err = swapped(ctx, q, p.ID, row, err, "allocation is not running at the observed revision")
		return err
	})
	if err != nil {
		return Allocation{}, wrap(op, err)
	}
	return out, nil
}

// ObservationMark says that running allocations of one lane were found
// running exactly as recorded by observations made after ReadAt.
type ObservationMark struct {
	// Lane is the node's id, or DirectLane.
	Lane uuid.UUID
	// ReadAt is the database time their page was read (Observable.ReadAt),
	// which precedes each of their observations.
	ReadAt time.Time
	// IDs are the allocations, 1 to MaxObservationMark, in id order.
	IDs []uuid.UUID
}

// MaxObservationMark bounds the ids of one mark (migration 0029).
const MaxObservationMark = 64

// RecordObservationMark records m behind the owner fence, in one
// statement that also deletes the lane's marks older than horizon: the
// observation of running compute found as recorded costs one row per page
// instead of a write per allocation (migration 0029). It writes no
// allocation row and changes nothing of what an allocation's observation
// says (observed_compute, observed_reason); observation_time, and so the
// scan's due flag, counts it. A mark claims only what was observed, so it
// needs no revision fence: an allocation that moved on meanwhile was still
// observed running after ReadAt. ErrInvalid for a malformed mark or
// horizon.
func (s *Owner) RecordObservationMark(ctx context.Context, m ObservationMark, horizon time.Duration) error {
	const op = "record observation mark"
	switch {
	case len(m.IDs) == 0 || len(m.IDs) > MaxObservationMark:
		return fmt.Errorf("%s: %w", op, errdefs.Invalid("ids", "must hold 1 to 64 allocation ids"))
	case m.ReadAt.IsZero():
		return fmt.Errorf("%s: %w", op, errdefs.Invalid("read_at", "required"))
	}
	h, err := ttlMicros("horizon", horizon)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err = s.ownedTx(ctx, func(q *db.Queries) error {
		return q.InsertObservationMark(ctx, db.InsertObservationMarkParams{
			Lane: m.Lane, ObservedAt: m.ReadAt, Ids: m.IDs, HorizonMicros: h,
		})
	})
	if err != nil {
		return wrap(op, err)
	}
	return nil
}

// Observable is a running allocation of the observation scan, with what
// the database clock says about it.
type Observable struct {
	Allocation
	// ObservationDue: never observed, or last observed (its row's
	// observed_at or its newest mark: observation_time) at least the
	// scan's observation wait ago.
	ObservationDue bool
	// KeepaliveDue: no keepalive yet, or the last one at least the scan's
	// keepalive wait ago.
	KeepaliveDue bool
	// KeepaliveLapsed: no keepalive confirmed for an hour (counted from
	// the allocation's last lifecycle transition before the first). A
	// lapse is never revived.
	KeepaliveLapsed bool
	// RuntimeConnected: an open Runtime connection accepted under the
	// owner epoch that holds the execution lease serves the allocation.
	RuntimeConnected bool
	// TurnRunning: one of its Session's Turns is running.
	TurnRunning bool
	// ReadAt is the database time of the page's read: what a mark of its
	// unchanged running observations records (RecordObservationMark).
	ReadAt time.Time
}

// ObservableScan is a page request of ListObservableForNode.
type ObservableScan struct {
	NodeID uuid.UUID
	// After is the keyset cursor (uuid.Nil for the start).
	After uuid.UUID
	// Limit is 1 to NodePageSize.
	Limit int
	// ObserveAfter and KeepaliveAfter are the waits after which an
	// observation or a keepalive is due (at least a microsecond).
	ObserveAfter, KeepaliveAfter time.Duration
}

// ListObservableForNode returns up to s.Limit running allocations with
// settled creation of node s.NodeID with ids after s.After, in id order:
// the observation scan's page. Like ListAllocationWorkForNode it filters by
// node before the limit, and an empty page means the end. s.NodeID
// DirectLane (uuid.Nil) pages the direct lane's allocations.
func (s *Reader) ListObservableForNode(ctx context.Context, sc ObservableScan) ([]Observable, error) {
	const op = "list observable for node"
	n, err := nodePageParam(op, sc.Limit)
	if err != nil {
		return nil, err
	}
	obs, err := ttlMicros("observe_after", sc.ObserveAfter)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	keep, err := ttlMicros("keepalive_after", sc.KeepaliveAfter)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return fetchRows(op, func() ([]db.ListObservableForNodeRow, error) {
		if sc.NodeID == DirectLane {
			rows, err := s.q.ListObservableForDirect(ctx, db.ListObservableForDirectParams{
				ObserveAfterMicros: obs, KeepaliveAfterMicros: keep, After: sc.After, PageSize: n,
			})
			out := make([]db.ListObservableForNodeRow, len(rows))
			for i, r := range rows {
				out[i] = db.ListObservableForNodeRow(r)
			}
			return out, err
		}
		return s.q.ListObservableForNode(ctx, db.ListObservableForNodeParams{
			ObserveAfterMicros: obs, KeepaliveAfterMicros: keep,
			NodeID: sc.NodeID, After: sc.After, PageSize: n,
		})
	}, func(r db.ListObservableForNodeRow) Observable {
		return Observable{
			Allocation:       allocationFromRow(r.Allocation),
			ObservationDue:   r.ObservationDue,
			KeepaliveDue:     r.KeepaliveDue,
			KeepaliveLapsed:  r.KeepaliveLapsed,
			RuntimeConnected: r.RuntimeConnected,
			TurnRunning:      r.TurnRunning,
			ReadAt:           r.ReadAt,
		}
	})
}

// EndTurnsOnLostCompute ends (unconfirmed) the running Turns whose
// Session's running allocation was observed stopped or missing after the
// Turn was dispatched, with the observation's fixed reason as failure
// code, and returns them. Only the current owner acts. The Turn logic
// (core/turns) is its only caller.
func (s *Owner) EndTurnsOnLostCompute(ctx context.Context) ([]TurnRef, error) {
	return sweepTurns(ctx, "end turns on lost compute", s.epoch, s.q.EndTurnsOnLostCompute,
		func(r db.EndTurnsOnLostComputeRow) TurnRef { return TurnRef{ID: r.ID, SessionID: r.SessionID} })
}
