package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
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
func (s *Reader) ListSuspensionCandidatesForNode(ctx context.Context, sc SuspensionScan) ([]SuspensionCandidate, error) {
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
func (s *Reader) SessionIdleSince(ctx context.Context, sessionID uuid.UUID) (Idleness, error) {
	r, err := s.q.SessionIdleSince(ctx, sessionID)
	if err != nil {
		return Idleness{}, wrap("session idle since", err)
	}
	return Idleness{Idle: r.Idle, Since: r.IdleSince, ReadAt: r.ReadAt}, nil
}

// ComputePhase is where an allocation's compute is in the suspension
// cycle (migration 0016).
type ComputePhase string

// The compute phases.
const (
	// PhaseRunning: the current incarnation is the compute.
	PhaseRunning ComputePhase = "running"
	// PhaseQuiescing: a suspension is armed and the Runtime asked to close
	// admission; nothing is captured yet.
	PhaseQuiescing ComputePhase = "quiescing"
	// PhaseSuspending: the capture receipt was consumed; Suspend may have
	// been sent and is only observed from then on.
	PhaseSuspending ComputePhase = "suspending"
	// PhaseSuspended: the snapshot holds the Environment; the source is
	// gone.
	PhaseSuspended ComputePhase = "suspended"
	// PhaseRestoring: a restore into a new incarnation is armed (and,
	// with RestoreDispatchedAt, may have been sent).
	PhaseRestoring ComputePhase = "restoring"
)

// Suspension is an allocation's suspension cycle state (all zero while it
// never left PhaseRunning).
type Suspension struct {
	// Operation is the armed suspension's operation id, also the
	// Runtime's suspension token (quiescing, suspending).
	Operation      *uuid.UUID
	ArmedAt        *time.Time
	AckedAt        *time.Time
	CaptureSentAt  *time.Time
	Snapshot       sandbox.SnapshotIdentity
	SuspendedAt    *time.Time
	RetentionUntil *time.Time
	// RestoreOperation is the armed restore's operation id (restoring).
	RestoreOperation *uuid.UUID
	RestoreSentAt    *time.Time
	// WakeRequestedAt is an admin's resume-now (ResumeSession),
	// RequestedAt an admin's suspend-now (SuspendSession) not armed yet.
	WakeRequestedAt *time.Time
	RequestedAt     *time.Time
	// RestoredAt is the last restore.
	RestoredAt *time.Time
}

// Compute returns the allocation's current incarnation (the target while
// restoring): the Create's (named by initial, with ProviderID its native
// id) until a restore named another.
func (a Allocation) Compute(initial func(sandbox.Reference) (sandbox.Compute, error)) (sandbox.Compute, error) {
	if a.ComputeName == "" {
		c, err := initial(a.Reference())
		if err != nil {
			return sandbox.Compute{}, err
		}
		if a.ComputePhase == PhaseRunning || a.ComputePhase == PhaseQuiescing || a.ComputePhase == PhaseSuspending {
			c.ID = a.ProviderID
		}
		return c, nil
	}
	return sandbox.Compute{Reference: a.Reference(), Generation: uint64(a.ComputeGeneration), Name: a.ComputeName, ID: a.ComputeID}, nil
}

// NativeID is the native id of a's current incarnation: the restored
// one's, or the Create's (ProviderID).
func (a Allocation) NativeID() string {
	if a.ComputeName != "" {
		return a.ComputeID
	}
	return a.ProviderID
}

// SuspensionWork is an allocation in a suspension phase with what the
// database clock says about it.
type SuspensionWork struct {
	Allocation
	// WorkWaiting: a Turn is queued for its Session, or a wake was asked.
	WorkWaiting bool
	// QuiesceOverdue: armed longer ago than the scan's QuiesceTimeout.
	QuiesceOverdue bool
	// RestoreOverdue: a restore was sent longer ago than RestoreTimeout.
	RestoreOverdue bool
	// RetentionExpired: suspended past its retention deadline.
	RetentionExpired bool
}

// SuspensionWorkScan is a page request of ListSuspensionWorkForNode.
type SuspensionWorkScan struct {
	NodeID         uuid.UUID
	After          uuid.UUID
	Limit          int
	QuiesceTimeout time.Duration
	RestoreTimeout time.Duration
}

// ListSuspensionWorkForNode returns up to sc.Limit running allocations of
// node sc.NodeID in a suspension phase (not PhaseRunning), with ids after
// sc.After, in id order. An empty page means the end.
func (s *Reader) ListSuspensionWorkForNode(ctx context.Context, sc SuspensionWorkScan) ([]SuspensionWork, error) {
	const op = "list suspension work for node"
	n, err := nodePageParam(op, sc.Limit)
	if err != nil {
		return nil, err
	}
	return fetchRows(op, func() ([]db.ListSuspensionWorkForNodeRow, error) {
		return s.q.ListSuspensionWorkForNode(ctx, db.ListSuspensionWorkForNodeParams{
			NodeID: sc.NodeID, After: sc.After, PageSize: n,
			QuiesceSeconds: seconds(sc.QuiesceTimeout), RestoreSeconds: seconds(sc.RestoreTimeout),
		})
	}, func(r db.ListSuspensionWorkForNodeRow) SuspensionWork {
		return SuspensionWork{Allocation: allocationFromRow(r.Allocation), WorkWaiting: r.WorkWaiting,
			QuiesceOverdue: r.QuiesceOverdue, RestoreOverdue: r.RestoreOverdue, RetentionExpired: r.RetentionExpired}
	})
}

// seconds is d in whole seconds, at least 1.
func seconds(d time.Duration) int32 { return int32(max(d/time.Second, 1)) }

// ErrNoRoom is ArmSuspension's and ArmRestore's answer when the node or
// the Session's project has no room: no retained slot (max_retained, the
// project's max_retained_sessions) for another snapshot, or no active
// slot (max_active, the project's max_active_sessions) for a restore.
// Nothing was written.
var ErrNoRoom = fmt.Errorf("node has no room: %w", errdefs.ErrFailedPrecondition)

// ArmSuspension records the quiesce intent of operation op for allocation
// id at revision: under the Session lock it repeats the idle test
// (SessionIdleSince against the generation's idle time, by the database
// clock; a restore or an attempt that ended without a snapshot less than
// an idle time ago counts as activity; an admin's suspend-now skips only
// the idle time: a Turn ended and nothing is queued or running), then,
// under the node's placement lock, checks a retained slot
// (max_retained counts the node's snapshots and the suspensions in
// flight) after the project's (max_retained_sessions, counted alike), and
// moves the running compute to PhaseQuiescing. ErrFenced
// when the revision moved or the Session is no longer idle enough (a Turn
// arrived: nothing is armed); ErrNoRoom without a retained slot.
func (s *Owner) ArmSuspension(ctx context.Context, id uuid.UUID, revision int64, op uuid.UUID) (Allocation, error) {
	if op == uuid.Nil {
		return Allocation{}, fmt.Errorf("arm suspension: %w", errdefs.Invalid("operation", "must be set"))
	}
	return s.phaseWrite(ctx, "arm suspension", func(q *db.Queries) (db.Allocation, error) {
		sess, a, g, err := lockAtRevision(ctx, q, id, revision)
		if err != nil {
			return db.Allocation{}, err
		}
		if SessionState(sess.State) != SessionActive || !g.SuspensionIdleSeconds.Valid {
			return db.Allocation{}, fmt.Errorf("no suspension: %w", errdefs.ErrFenced)
		}
		idleFor := time.Duration(g.SuspensionIdleSeconds.Int64) * time.Second
		idle, err := q.SessionIdleSince(ctx, sess.ID)
		if err != nil {
			return db.Allocation{}, err
		}
		idleness := Idleness{Idle: idle.Idle, Since: idle.IdleSince, ReadAt: idle.ReadAt}
		// An admin's suspend-now waits for no idle time, but the rest of
		// the predicate holds as for an idle suspension.
		ready := idleness.Idle
		if a.Suspension.RequestedAt == nil {
			ready = idleness.IdleFor(idleFor)
		}
		if !ready {
			return db.Allocation{}, fmt.Errorf("the session is not idle: %w", errdefs.ErrFenced)
		}
		// The project's row before the node's (migration 0024).
		projectRoom, err := q.ProjectRetainedRoom(ctx, sess.ProjectID)
		if err != nil {
			return db.Allocation{}, err
		}
		if !projectRoom {
			return db.Allocation{}, ErrNoRoom
		}
		room, err := q.NodeRetainedRoom(ctx, db.NodeRetainedRoomParams{NodeID: a.NodeID, MaxRetained: int64(g.MaxRetained)})
		if err != nil {
			return db.Allocation{}, err
		}
		if !room {
			return db.Allocation{}, ErrNoRoom
		}
		return q.ArmSuspension(ctx, db.ArmSuspensionParams{ID: id, Revision: revision, Operation: &op, QuietSeconds: seconds(idleFor)})
	})
}

// lockAtRevision takes the Session lock, then allocation id's row lock,
// in the order of every terminal cleanup, and reads its generation;
// ErrFenced unless the allocation is at revision.
func lockAtRevision(ctx context.Context, q *db.Queries, id uuid.UUID, revision int64) (db.Session, Allocation, db.DeploymentGeneration, error) {
	sess, _, err := lockSessionOf(ctx, q, id)
	if err != nil {
		return db.Session{}, Allocation{}, db.DeploymentGeneration{}, err
	}
	row, err := q.LockAllocation(ctx, id)
	if err != nil {
		return db.Session{}, Allocation{}, db.DeploymentGeneration{}, err
	}
	a := allocationFromRow(row)
	if a.Revision != revision {
		return db.Session{}, Allocation{}, db.DeploymentGeneration{}, fmt.Errorf("allocation moved: %w", errdefs.ErrFenced)
	}
	g, err := q.GetDeploymentGeneration(ctx, a.Generation)
	return sess, a, g, err
}

// noRowFenced turns a compare-and-swap that matched no row into ErrFenced.
func noRowFenced(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("allocation moved: %w", errdefs.ErrFenced)
	}
	return err
}

// RecordQuiesceAck records the Runtime's acknowledgement of suspension op
// (the gateway calls it) and wakes the node's worker, which captures.
// ErrFenced unless the allocation is quiescing under op.
func (s *Owner) RecordQuiesceAck(ctx context.Context, id, op uuid.UUID) (Allocation, error) {
	return s.phaseWrite(ctx, "record quiesce ack", func(q *db.Queries) (db.Allocation, error) {
		row, err := q.RecordQuiesceAck(ctx, db.RecordQuiesceAckParams{ID: id, Operation: &op})
		if err != nil {
			return row, err
		}
		return row, notifyNodeWork(ctx, q, laneOf(row.NodeID))
	})
}

// AbortQuiesce ends suspension op before any capture (a Turn arrived, the
// Runtime rejected or did not answer): back to PhaseRunning. ErrFenced
// unless the allocation is quiescing under op.
func (s *Owner) AbortQuiesce(ctx context.Context, id, op uuid.UUID) (Allocation, error) {
	return s.phaseWrite(ctx, "abort quiesce", func(q *db.Queries) (db.Allocation, error) {
		return q.AbortQuiesce(ctx, db.AbortQuiesceParams{ID: id, Operation: &op})
	})
}

// phaseWrite runs one fenced compare-and-swap of the suspension cycle.
func (s *Owner) phaseWrite(ctx context.Context, name string, write func(q *db.Queries) (db.Allocation, error)) (Allocation, error) {
	var out Allocation
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		row, err := write(q)
		if err != nil {
			return noRowFenced(err)
		}
		out = allocationFromRow(row)
		return nil
	})
	if err != nil {
		return Allocation{}, wrap(name, err)
	}
	return out, nil
}

// ClaimCapture consumes the capture receipt of suspension op: under the
// Session lock, the share of the compute-phase check with new Turns, it
// repeats the idle predicate without its idle time (SessionIdleSince: a
// Turn ended, nothing queued or running), and moves the acknowledged
// quiescing compute to PhaseSuspending. Only a nil error permits one
// Suspend. When work arrived since the arming, the suspension is aborted
// in the same transaction (back to PhaseRunning) and ErrFenced returned;
// ErrFenced too when the receipt is spent or not acknowledged.
func (s *Owner) ClaimCapture(ctx context.Context, id, op uuid.UUID) (Allocation, error) {
	const name = "claim capture"
	var out Allocation
	var aborted bool
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		sess, _, err := lockSessionOf(ctx, q, id)
		if err != nil {
			return err
		}
		idle, err := q.SessionIdleSince(ctx, sess.ID)
		if err != nil {
			return err
		}
		if !idle.Idle || SessionState(sess.State) != SessionActive {
			if _, err := q.AbortQuiesce(ctx, db.AbortQuiesceParams{ID: id, Operation: &op}); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			aborted = true
			return nil
		}
		row, err := q.ClaimCapture(ctx, db.ClaimCaptureParams{ID: id, Operation: &op})
		if err != nil {
			return noRowFenced(err)
		}
		out = allocationFromRow(row)
		return nil
	})
	switch {
	case err != nil:
		return Allocation{}, wrap(name, err)
	case aborted:
		return Allocation{}, fmt.Errorf("%s: work arrived, the suspension is aborted: %w", name, errdefs.ErrFenced)
	}
	return out, nil
}

// RecordSuspended records the capture of suspension op as snapshot snap
// (kept exactly as the provider returned it): PhaseSuspended, the source
// gone, the retention deadline the arming observation plus the
// generation's retention. The node's active slot becomes a retained one
// in the same transaction. ErrFenced unless suspending under op.
func (s *Owner) RecordSuspended(ctx context.Context, id, op uuid.UUID, snap sandbox.SnapshotIdentity) (Allocation, error) {
	if snap.ID == "" {
		return Allocation{}, fmt.Errorf("record suspended: %w", errdefs.Invalid("snapshot.id", "must be set"))
	}
	return s.phaseWrite(ctx, "record suspended", func(q *db.Queries) (db.Allocation, error) {
		return q.RecordSuspended(ctx, db.RecordSuspendedParams{ID: id, Operation: &op,
			SnapshotID: pgtype.Text{String: snap.ID, Valid: true}, SnapshotProvenance: pgtype.Text{String: snap.Provenance, Valid: true}})
	})
}

// RollBackCapture records that suspension op left the source running
// (never paused, thawed by ResumeCompute, or running again after a
// capture that completed): back to PhaseRunning, with computeID the
// source's native id when the provider gave one. A snapshot the attempt
// made (complete, or only named by an incomplete capture) becomes a
// leftover cleanup owes, in the same transaction.
func (s *Owner) RollBackCapture(ctx context.Context, id, op uuid.UUID, computeID string, leftover *sandbox.SnapshotIdentity) (Allocation, error) {
	return s.phaseWrite(ctx, "roll back capture", func(q *db.Queries) (db.Allocation, error) {
		row, err := q.RollBackCapture(ctx, db.RollBackCaptureParams{ID: id, Operation: &op,
			ComputeID: pgtype.Text{String: computeID, Valid: computeID != ""}})
		if err != nil || leftover == nil || leftover.ID == "" {
			return row, err
		}
		return row, q.InsertLeftover(ctx, db.InsertLeftoverParams{AllocationID: id, Kind: leftoverSnapshot,
			Identity: leftover.ID, Provenance: leftover.Provenance})
	})
}

// ErrTargetOwed is ArmRestore's answer while an abandoned restore's target
// is still owed to cleanup (not yet confirmed absent by its exact id):
// the next restore waits for it, so two incarnations holding the
// Session's device credential never run at once. Nothing was written.
var ErrTargetOwed = fmt.Errorf("an abandoned restore's target is still owed to cleanup: %w", errdefs.ErrFailedPrecondition)

// ArmRestore records the restore intent of operation op for suspended
// allocation id at revision, into incarnation target (the provider's
// NewCompute of the last one): under the node's placement lock, the one
// new placement takes, it checks an active slot (max_active), after the
// project's (max_active_sessions, its row locked first), and moves the
// allocation to PhaseRestoring, which takes the slot. A restore is a
// bootstrap, like a Create: while the provider is disabled it is
// ErrProviderDisabled (the provider switch read under a share lock, as
// ClaimCreate reads it) and nothing is written. ErrNoRoom without an
// active slot; ErrTargetOwed while an abandoned target awaits its
// cleanup; ErrFenced when the revision moved, the allocation is not
// suspended any more (deletion, revocation) or its retention passed.
func (s *Owner) ArmRestore(ctx context.Context, id uuid.UUID, revision int64, op uuid.UUID, target sandbox.Compute) (Allocation, error) {
	if op == uuid.Nil || target.Name == "" || target.Generation < 2 {
		return Allocation{}, fmt.Errorf("arm restore: %w", errdefs.Invalid("target", "must name a later incarnation"))
	}
	return s.phaseWrite(ctx, "arm restore", func(q *db.Queries) (db.Allocation, error) {
		// The switch first, in the order of every admission (CreateSession,
		// ClaimCreate): before the Session, allocation and node locks.
		if _, err := admitProvider(ctx, q); err != nil {
			return db.Allocation{}, err
		}
		sess, a, g, err := lockAtRevision(ctx, q, id, revision)
		if err != nil {
			return db.Allocation{}, err
		}
		owes, err := q.AllocationOwesCompute(ctx, id)
		if err != nil {
			return db.Allocation{}, err
		}
		if owes {
			return db.Allocation{}, ErrTargetOwed
		}
		// The project's row before the node's (migration 0024).
		projectRoom, err := q.ProjectActiveRoom(ctx, sess.ProjectID)
		if err != nil {
			return db.Allocation{}, err
		}
		if !projectRoom {
			return db.Allocation{}, ErrNoRoom
		}
		room, err := q.NodeActiveRoom(ctx, db.NodeActiveRoomParams{NodeID: a.NodeID, MaxActive: int64(g.MaxActive)})
		if err != nil {
			return db.Allocation{}, err
		}
		if !room {
			return db.Allocation{}, ErrNoRoom
		}
		return q.ArmRestore(ctx, db.ArmRestoreParams{ID: id, Revision: revision, Operation: &op,
			ComputeGeneration: int64(target.Generation), ComputeName: pgtype.Text{String: target.Name, Valid: true}})
	})
}

// ClaimRestore consumes the restore receipt of operation op, once. Only a
// nil error permits one Resume. While the provider is disabled it is
// ErrProviderDisabled and the receipt stays fresh (the armed restore
// waits, as a pending Create does); ErrFenced when the receipt is spent,
// the allocation's deletion or device revocation came first, or the
// snapshot's retention deadline passed (database clock).
func (s *Owner) ClaimRestore(ctx context.Context, id, op uuid.UUID) (Allocation, error) {
	return s.phaseWrite(ctx, "claim restore", func(q *db.Queries) (db.Allocation, error) {
		if _, err := admitProvider(ctx, q); err != nil {
			return db.Allocation{}, err
		}
		return q.ClaimRestore(ctx, db.ClaimRestoreParams{ID: id, Operation: &op})
	})
}

// RecordRestored records restore op: the target incarnation runs with
// native id computeID (PhaseRunning), and the consumed snapshot becomes a
// leftover cleanup owes, in the same transaction. It is the restore's
// final compare-and-swap, and the guide's order holds up to it:
// deletion, device revocation and retention expiry win over the wake, so
// it is ErrFenced when the allocation's cleanup was requested, its device
// revoked or its retention deadline passed by the database clock (then
// nothing is recorded and no wake may follow). The new incarnation's
// keepalive lapse counts from the restore.
func (s *Owner) RecordRestored(ctx context.Context, id, op uuid.UUID, computeID string) (Allocation, error) {
	if computeID == "" {
		return Allocation{}, fmt.Errorf("record restored: %w", errdefs.Invalid("compute.id", "must be set"))
	}
	return s.phaseWrite(ctx, "record restored", func(q *db.Queries) (db.Allocation, error) {
		cur, err := q.LockAllocation(ctx, id)
		if err != nil {
			return db.Allocation{}, err
		}
		row, err := q.RecordRestored(ctx, db.RecordRestoredParams{ID: id, Operation: &op, ComputeID: pgtype.Text{String: computeID, Valid: true}})
		if err != nil {
			return row, err
		}
		return row, q.InsertLeftover(ctx, db.InsertLeftoverParams{AllocationID: id, Kind: leftoverSnapshot,
			Identity: cur.SnapshotID.String, Provenance: cur.SnapshotProvenance.String})
	})
}

// AbandonRestore gives up restore op, whose outcome stayed unknown after
// an observation found the exact instance the attempt made (target.ID,
// never running): that instance becomes a leftover cleanup owes and the
// allocation is suspended again, in one transaction. The next restore
// uses a later incarnation and is armed only once the instance is
// confirmed absent (ErrTargetOwed until then). A target without its
// native id is ErrInvalid: a restore whose instance was never observed
// (a failed or empty observation) is never abandoned.
func (s *Owner) AbandonRestore(ctx context.Context, id, op uuid.UUID, target sandbox.Compute) (Allocation, error) {
	if target.ID == "" || target.Name == "" {
		return Allocation{}, fmt.Errorf("abandon restore: %w", errdefs.Invalid("target.id", "must name the observed instance"))
	}
	return s.phaseWrite(ctx, "abandon restore", func(q *db.Queries) (db.Allocation, error) {
		row, err := q.AbandonRestore(ctx, db.AbandonRestoreParams{ID: id, Operation: &op})
		if err != nil {
			return row, err
		}
		return row, q.InsertLeftover(ctx, db.InsertLeftoverParams{AllocationID: id, Kind: leftoverCompute,
			Identity: target.Name, Generation: pgtype.Int8{Int64: int64(target.Generation), Valid: true},
			NativeID: pgtype.Text{String: target.ID, Valid: target.ID != ""}})
	})
}

// AbandonRestoreOnReceipt gives up the restore of operation op of
// allocation id whose target the provider answered with its absence
// receipt (sandbox.ComputeInfo.AbsenceReceipt: its name is claimed, so the
// attempt can never make it): restoring back to suspended, with nothing
// owed to cleanup (the claim is the adapter's to remove once it can). The
// next restore uses a new incarnation.
func (s *Owner) AbandonRestoreOnReceipt(ctx context.Context, id, op uuid.UUID) (Allocation, error) {
	return s.phaseWrite(ctx, "abandon restore", func(q *db.Queries) (db.Allocation, error) {
		return q.AbandonRestore(ctx, db.AbandonRestoreParams{ID: id, Operation: &op})
	})
}

// ExpireRetention ends allocation id whose snapshot's retention deadline
// passed by the database clock while it is suspended, or restoring and
// not yet recorded restored (expiry wins over a wake up to
// RecordRestored): terminal cleanup with TerminalExpired (the device
// revoked, the Environment expired, queued Turns ended, cleanup
// requested, so the worker's Kill deletes the snapshot and any restored
// incarnation), under the Session lock. ErrFenced when it is past neither
// (a restore was recorded first).
func (s *Owner) ExpireRetention(ctx context.Context, id uuid.UUID) (Termination, error) {
	const name = "expire retention"
	var out Termination
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		_, env, err := lockSessionOf(ctx, q, id)
		if err != nil {
			return err
		}
		expired, err := q.RetentionPassed(ctx, id)
		if err != nil {
			return err
		}
		if !expired {
			return fmt.Errorf("retention has not passed: %w", errdefs.ErrFenced)
		}
		out, err = terminate(ctx, q, env.ID, TerminalExpired, "")
		return err
	})
	if err != nil {
		return Termination{}, wrap(name, err)
	}
	return out, nil
}

// The leftover kinds.
const (
	leftoverSnapshot = "snapshot"
	leftoverCompute  = "compute"
)

// Leftover is a past incarnation or snapshot of an allocation that
// cleanup still owes.
type Leftover struct {
	ID           int64
	AllocationID uuid.UUID
	// Snapshot is set for a snapshot leftover, Compute for an incarnation.
	Snapshot *sandbox.SnapshotIdentity
	Compute  *sandbox.Compute
}

// ListOwedLeftovers returns up to 32 leftovers of allocation id not yet
// confirmed deleted, oldest first.
func (s *Reader) ListOwedLeftovers(ctx context.Context, a Allocation) ([]Leftover, error) {
	return fetchRows("list owed leftovers", func() ([]db.AllocationLeftover, error) {
		return s.q.ListOwedLeftovers(ctx, a.ID)
	}, func(r db.AllocationLeftover) Leftover {
		l := Leftover{ID: r.ID, AllocationID: r.AllocationID}
		if r.Kind == leftoverSnapshot {
			l.Snapshot = &sandbox.SnapshotIdentity{ID: r.Identity, Provenance: r.Provenance}
		} else {
			l.Compute = &sandbox.Compute{Reference: a.Reference(), Generation: uint64(r.Generation.Int64), Name: r.Identity, ID: r.NativeID.String}
		}
		return l
	})
}

// MarkLeftoverDeleted records that the provider confirmed leftover id
// absent.
func (s *Owner) MarkLeftoverDeleted(ctx context.Context, id int64) error {
	return s.ownedTx(ctx, func(q *db.Queries) error {
		_, err := q.MarkLeftoverDeleted(ctx, id)
		return err
	})
}

// ListAllocationsOwingLeftovers returns up to limit running allocations of
// node nodeID with ids after after that owe a leftover, in id order.
func (s *Reader) ListAllocationsOwingLeftovers(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]uuid.UUID, error) {
	const op = "list allocations owing leftovers"
	n, err := nodePageParam(op, limit)
	if err != nil {
		return nil, err
	}
	ids, err := s.q.ListAllocationsOwingLeftovers(ctx, db.ListAllocationsOwingLeftoversParams{NodeID: nodeID, After: after, PageSize: n})
	if err != nil {
		return nil, wrap(op, err)
	}
	return ids, nil
}

// The refusals of SuspendSession and ResumeSession (errdefs.Refuse: a
// fixed reason and what to do).
var (
	// ErrSessionBusy: a Turn ended, but one is queued or running, or a
	// file operation is pending or running.
	ErrSessionBusy error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "session_busy",
		"a turn or file operation is queued or running: suspend the session after it ends")
	// ErrNoTurnEnded: no Turn of the Session has ended yet; a suspension
	// needs at least one terminal Turn, as the idle suspension does.
	ErrNoTurnEnded error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "no_turn_ended",
		"the session has not finished a turn yet: suspend it after its first turn ends")
	// ErrComputeNotRunning: the Session's compute has not started yet.
	ErrComputeNotRunning error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "compute_not_running",
		"the session's compute is not running yet: wait until the session is active")
	// ErrSuspensionNotConfigured: the deployment has no suspension policy.
	ErrSuspensionNotConfigured error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "suspension_not_configured",
		"the deployment has no suspension policy: commit one with a suspension idle time and retention")
)

// The kinds of a compute request.
const (
	computeRequestSuspend = "suspend"
	computeRequestResume  = "resume"
)

// RequestSuspend records an admin's suspend-now of Session sessionID under
// request id requestID. It applies the idle suspension's predicate
// (session_idle_since: at least one Turn ended, none queued or running)
// without its idle time, so the node's worker arms it at once (the
// Runtime still quiesces first). Compute already in a suspension phase is
// left as it is. A retry of the same request id changes nothing and
// returns the Session; the id of another request is ErrExists. Refusals:
// ErrSessionNotActive, ErrEnvironmentEnded, ErrComputeNotRunning,
// ErrSuspensionNotConfigured, ErrNoTurnEnded, ErrSessionBusy.
func (s *Owner) RequestSuspend(ctx context.Context, sessionID, requestID uuid.UUID) (SessionBundle, error) {
	return s.computeRequest(ctx, "request suspend", sessionID, requestID, computeRequestSuspend,
		func(q *db.Queries, sess db.Session, a Allocation) error {
			if a.ComputePhase != PhaseRunning {
				return nil
			}
			g, err := q.GetDeploymentGeneration(ctx, a.Generation)
			if err != nil {
				return err
			}
			if !g.SuspensionIdleSeconds.Valid {
				return ErrSuspensionNotConfigured
			}
			if err := refuseUnlessIdle(ctx, q, sess.ID); err != nil {
				return err
			}
			if _, err := q.RequestSuspend(ctx, a.ID); err != nil {
				return err
			}
			return notifyNodeWork(ctx, q, a.NodeID)
		})
}

// refuseUnlessIdle applies the one idle predicate (session_idle_since)
// to Session sessionID, without an idle time: nil when a Turn ended and
// none is queued or running. Only when the predicate refuses does it read
// whether a Turn already ended, to say what to wait for: ErrSessionBusy
// when one did (so one is queued or running now), ErrNoTurnEnded
// otherwise (the first Turn must end first).
func refuseUnlessIdle(ctx context.Context, q *db.Queries, sessionID uuid.UUID) error {
	idle, err := q.SessionIdleSince(ctx, sessionID)
	if err != nil || idle.Idle {
		return err
	}
	ended, err := q.SessionHasEndedTurn(ctx, sessionID)
	if err != nil {
		return err
	}
	if ended {
		return ErrSessionBusy
	}
	return ErrNoTurnEnded
}

// RequestResume records an admin's resume-now of Session sessionID under
// request id requestID: a suspended Session is restored as a queued Turn
// would restore it; running compute is left as it is. Retries as
// RequestSuspend; refusals ErrSessionNotActive, ErrEnvironmentEnded.
func (s *Owner) RequestResume(ctx context.Context, sessionID, requestID uuid.UUID) (SessionBundle, error) {
	return s.computeRequest(ctx, "request resume", sessionID, requestID, computeRequestResume,
		func(q *db.Queries, _ db.Session, a Allocation) error {
			if a.ComputePhase == PhaseRunning {
				return nil
			}
			if _, err := q.RequestWake(ctx, a.ID); err != nil {
				return err
			}
			return notifyNodeWork(ctx, q, a.NodeID)
		})
}

// computeRequest is the shared shape of RequestSuspend and RequestResume:
// the request id recorded first (a retry returns the Session as it is),
// then, under the Session lock, the checks and act on the Session's
// unreleased, running allocation.
func (s *Owner) computeRequest(ctx context.Context, name string, sessionID, requestID uuid.UUID, kind string,
	act func(q *db.Queries, sess db.Session, a Allocation) error,
) (SessionBundle, error) {
	if requestID == uuid.Nil {
		return SessionBundle{}, fmt.Errorf("%s: %w", name, errdefs.Invalid("request_id", "must be set"))
	}
	var out SessionBundle
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		sess, err := q.LockSession(ctx, sessionID)
		if err != nil {
			return err
		}
		retry, err := recordComputeRequest(ctx, q, sessionID, requestID, kind)
		if err != nil {
			return err
		}
		if retry {
			out, err = loadBundle(ctx, q, sess)
			return err
		}
		if SessionState(sess.State) != SessionActive {
			return ErrSessionNotActive
		}
		a, err := runningAllocation(ctx, q, sessionID)
		if err != nil {
			return err
		}
		if err := act(q, sess, a); err != nil {
			return err
		}
		out, err = loadBundle(ctx, q, sess)
		return err
	})
	if err != nil {
		return SessionBundle{}, wrap(name, err)
	}
	return out, nil
}

// recordComputeRequest records requestID, an admin's compute request of
// kind for Session sessionID; retry is true when it was recorded before
// (nothing more to do). The id of another request is ErrExists.
func recordComputeRequest(ctx context.Context, q *db.Queries, sessionID, requestID uuid.UUID, kind string) (retry bool, err error) {
	_, err = q.InsertComputeRequest(ctx, db.InsertComputeRequestParams{RequestID: requestID, SessionID: sessionID, Kind: kind})
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return false, err
	}
	prev, err := q.GetComputeRequest(ctx, requestID)
	if err != nil {
		return false, err
	}
	if prev.SessionID != sessionID || prev.Kind != kind {
		return false, fmt.Errorf("request_id was used for another request: %w", errdefs.ErrExists)
	}
	return true, nil
}

// runningAllocation is Session sessionID's unreleased allocation, running
// with its device unrevoked: ErrEnvironmentEnded once its Environment
// ended, ErrComputeNotRunning without one.
func runningAllocation(ctx context.Context, q *db.Queries, sessionID uuid.UUID) (Allocation, error) {
	env, err := q.GetEnvironmentBySession(ctx, sessionID)
	if err != nil {
		return Allocation{}, err
	}
	if env.TerminalCause.Valid {
		return Allocation{}, ErrEnvironmentEnded
	}
	row, err := q.GetUnreleasedAllocationForEnvironment(ctx, env.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Allocation{}, ErrComputeNotRunning
	}
	if err != nil {
		return Allocation{}, err
	}
	a := allocationFromRow(row)
	if a.State != AllocationRunning || a.DeviceRevokedAt != nil {
		return Allocation{}, ErrComputeNotRunning
	}
	return a, nil
}
