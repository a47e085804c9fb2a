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
	"berth.dev/sandbox/errdefs"
)

// ResetPhase is where a deployment reset stands (migration 0027).
type ResetPhase string

// The reset phases, in order; done and failed are final.
const (
	ResetArchiving  ResetPhase = "archiving"
	ResetDraining   ResetPhase = "draining"
	ResetFinalizing ResetPhase = "finalizing"
	ResetDone       ResetPhase = "done"
	ResetFailed     ResetPhase = "failed"
)

// Reset bounds: a reset's deadline is at most MaxResetTimeout after its
// request time (the schema holds it too; core/reset sets the shortest).
const (
	MaxResetTimeout = 24 * time.Hour
	// ResetPageSize is how many Sessions one archive page reads.
	ResetPageSize = 32
)

// ResetFailureDeadline is the failure code of a reset whose deadline
// passed before it finished.
const ResetFailureDeadline = "reset_deadline_passed"

// ErrDeploymentResetting is the class (errdefs.ErrFailedPrecondition) of
// an admission (CreateSession), a Create or restore (ClaimCreate,
// ArmRestore, ClaimRestore) and a deployment change (commit, replacement,
// provider switch) while a deployment reset is active: nothing was
// written; pending work waits and a new Session may be created once the
// reset ended. Deletion, archive, cleanup, Turns and reads are never
// fenced.
var ErrDeploymentResetting error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "deployment_resetting",
	"a deployment reset is in progress: GetReset shows its progress; new Sessions and deployment changes wait for its end")

// ErrResetInProgress refuses a StartReset while another reset (another
// request id) is active.
var ErrResetInProgress error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "reset_in_progress",
	"a deployment reset is already in progress: follow it with GetReset; start another once it ended")

// ErrResetHeld is the class (errdefs.ErrFailedPrecondition) of a
// FinalizeReset that found resources still held under the deployment
// lock: nothing was cleared and the reset is draining again.
var ErrResetHeld error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "reset_resources_held",
	"resources are still held: the reset waits for their cleanup")

// Reset is a deployment reset as stored.
type Reset struct {
	ID        uuid.UUID
	RequestID uuid.UUID
	// Actor is who requested it ("admin": the schema admits no other).
	Actor string
	// Generation is the current generation at the request, 0 for none.
	Generation  uint64
	RequestedAt time.Time
	Deadline    time.Time
	Phase       ResetPhase
	// SessionsArchived counts the Sessions the reset archived.
	SessionsArchived int64
	// Held and HeldOffline are the last held snapshot (ListHeld), taken at
	// ProgressAt (nil before the first).
	Held, HeldOffline int64
	ProgressAt        *time.Time
	// EmptyGeneration is the generation the empty provider bears, once
	// done.
	EmptyGeneration uint64
	FailureCode     string
	EndedAt         *time.Time
	// cursor: the last Session the archive passed (zero before any).
	cursorCreatedAt time.Time
	cursorID        uuid.UUID
	// Expired reports, for ActiveReset only, that the deadline passed on
	// the database clock.
	Expired bool
}

// Active reports whether r is still to finish.
func (r Reset) Active() bool { return r.Phase != ResetDone && r.Phase != ResetFailed }

// Provenance is the requester's provenance the reset's own decisions
// carry (its archives, its end), with the reset as their parent: rebuilt
// from the stored row, never from a caller.
func (r Reset) Provenance() Provenance {
	return NewAdminProvenance(r.RequestID).WithParent(r.ID)
}

func resetFromRow(r db.DeploymentReset) Reset {
	out := Reset{
		ID: r.ID, RequestID: r.RequestID, Actor: r.Actor, RequestedAt: r.RequestedAt, Deadline: r.Deadline,
		Phase: ResetPhase(r.Phase), SessionsArchived: r.SessionsArchived, Held: r.Held, HeldOffline: r.HeldOffline,
		ProgressAt: r.ProgressAt, EndedAt: r.EndedAt, FailureCode: r.FailureCode.String,
	}
	if r.Generation.Valid {
		out.Generation = uint64(r.Generation.Int64)
	}
	if r.EmptyGeneration.Valid {
		out.EmptyGeneration = uint64(r.EmptyGeneration.Int64)
	}
	if r.CursorCreatedAt != nil && r.CursorID != nil {
		out.cursorCreatedAt, out.cursorID = *r.CursorCreatedAt, *r.CursorID
	}
	return out
}

// StartReset starts deployment reset id for the administrator's request
// (prov, whose request id is the reset's), with a deadline timeout after
// its request time (database clock): one transaction under the deployment
// row's lock (the mutation gate) inserts it in phase archiving, bound to
// the current generation, sets the admission fence and records reset.start
// (event id eventID). The same request id returns the reset it started; a
// reset active for another request is ErrResetInProgress. It is fenced by
// the owner epoch: only the owner advances a reset.
func (s *Owner) StartReset(ctx context.Context, id uuid.UUID, timeout time.Duration, prov Provenance, eventID uuid.UUID) (Reset, error) {
	const op = "start reset"
	if err := prov.valid(); err != nil {
		return Reset{}, fmt.Errorf("%s: %w", op, err)
	}
	if prov.actor != ActorAdmin {
		return Reset{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("provenance", "a reset is an administrator's act"))
	}
	if timeout < time.Second || timeout > MaxResetTimeout || timeout%time.Second != 0 {
		return Reset{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("timeout", "must be whole seconds, at most 24h"))
	}
	var out Reset
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		if _, err := q.LockDeployment(ctx); err != nil {
			return err
		}
		if prior, err := q.GetResetByRequest(ctx, prov.requestID); err == nil {
			out = resetFromRow(prior)
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := q.GetActiveReset(ctx); err == nil {
			return ErrResetInProgress
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		row, err := q.InsertReset(ctx, db.InsertResetParams{
			ID: id, RequestID: prov.requestID, Actor: ActorAdmin, TimeoutSeconds: int64(timeout / time.Second),
		})
		if err != nil {
			return err
		}
		if err := q.SetDeploymentReset(ctx, &id); err != nil {
			return err
		}
		out = resetFromRow(row)
		return recordAudit(ctx, q, prov, AuditEntry{
			ID: eventID, Kind: AuditDecision, Action: "reset.start", Resource: "resets/" + id.String(), Outcome: "ok",
			Detail: map[string]any{"generation": out.Generation, "deadline_seconds": int64(timeout / time.Second)},
		})
	})
	if err != nil {
		return Reset{}, wrap(op, err)
	}
	return out, nil
}

// GetReset reads reset id; ErrNotFound when there is none.
func (s *Reader) GetReset(ctx context.Context, id uuid.UUID) (Reset, error) {
	row, err := s.q.GetReset(ctx, id)
	if err != nil {
		return Reset{}, wrap("get reset", err)
	}
	return resetFromRow(row), nil
}

// LatestReset reads the reset requested last; ErrNotFound before any.
func (s *Reader) LatestReset(ctx context.Context) (Reset, error) {
	row, err := s.q.GetLatestReset(ctx)
	if err != nil {
		return Reset{}, wrap("latest reset", err)
	}
	return resetFromRow(row), nil
}

// ActiveReset reads the active reset, with Expired on the database clock;
// ErrNotFound when none is active.
func (s *Reader) ActiveReset(ctx context.Context) (Reset, error) {
	row, err := s.q.GetActiveReset(ctx)
	if err != nil {
		return Reset{}, wrap("active reset", err)
	}
	out := resetFromRow(db.DeploymentReset{
		ID: row.ID, RequestID: row.RequestID, Actor: row.Actor, Generation: row.Generation, RequestedAt: row.RequestedAt,
		Deadline: row.Deadline, Phase: row.Phase, CursorCreatedAt: row.CursorCreatedAt, CursorID: row.CursorID,
		SessionsArchived: row.SessionsArchived, Held: row.Held, HeldOffline: row.HeldOffline, ProgressAt: row.ProgressAt,
		EmptyGeneration: row.EmptyGeneration, FailureCode: row.FailureCode, EndedAt: row.EndedAt,
	})
	out.Expired = row.Expired
	return out, nil
}

// ResetSession is a Session a reset's archive page names.
type ResetSession struct {
	ID        uuid.UUID
	CreatedAt time.Time
}

// ResetPage reads the next page of at most ResetPageSize Sessions reset r
// archives: active, created at or before its request time, after its
// cursor, in (created_at, id) order. Empty: the archive is complete.
func (s *Reader) ResetPage(ctx context.Context, r Reset) ([]ResetSession, error) {
	after := r.cursorCreatedAt
	if after.IsZero() {
		after = time.Unix(0, 0).UTC()
	}
	return fetchRows("reset page", func() ([]db.ListResetSessionsRow, error) {
		return s.q.ListResetSessions(ctx, db.ListResetSessionsParams{
			RequestedAt: r.RequestedAt, AfterCreatedAt: after, AfterID: r.cursorID, PageSize: ResetPageSize,
		})
	}, func(row db.ListResetSessionsRow) ResetSession {
		return ResetSession{ID: row.ID, CreatedAt: row.CreatedAt}
	})
}

// ArchiveForReset archives Session sess for reset r and moves r's cursor
// past it, in one Session-first transaction: the Session's lock, its
// archive as ArchiveSession makes it (its project scope read from the
// Session row, the provenance the reset's own: Reset.Provenance, event id
// eventID), then the reset's cursor. A Session deleted or archived since
// the page was read is passed over (the cursor still moves). A reset no
// longer archiving is ErrFenced and nothing is written. The Termination
// is what the archive ended (zero when it passed the Session over), for
// the caller's events.
func (s *Owner) ArchiveForReset(ctx context.Context, r Reset, sess ResetSession, eventID uuid.UUID) (Termination, error) {
	const op = "archive for reset"
	prov := r.Provenance()
	var term Termination
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		archived := int64(0)
		_, t, did, err := archiveSession(ctx, q, sess.ID, prov, eventID)
		term = t
		switch {
		case errors.Is(err, ErrSessionDeleted):
		case err != nil:
			return err
		case did:
			archived = 1
		}
		n, err := q.AdvanceResetCursor(ctx, db.AdvanceResetCursorParams{
			ID: r.ID, CreatedAt: &sess.CreatedAt, SessionID: &sess.ID, Archived: archived,
		})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("the reset is no longer archiving: %w", errdefs.ErrFenced)
		}
		return nil
	})
	if err != nil {
		return Termination{}, wrap(op, err)
	}
	return term, nil
}

// MoveReset moves reset id from phase from to phase to; ErrFenced when it
// is not in from (another pass moved it).
func (s *Owner) MoveReset(ctx context.Context, id uuid.UUID, from, to ResetPhase) error {
	const op = "move reset"
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		n, err := q.MoveReset(ctx, db.MoveResetParams{ID: id, FromPhase: string(from), ToPhase: string(to)})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("reset is not %s: %w", from, errdefs.ErrFenced)
		}
		return nil
	})
	if err != nil {
		return wrap(op, err)
	}
	return nil
}

// HeldLane is what one lane holds in a held snapshot (ListHeld): Node is
// the node, uuid.Nil for Core's direct lane.
type HeldLane struct {
	Node    uuid.UUID
	Held    int64
	Present bool
}

// Held sums a snapshot: everything held, and what offline lanes hold.
func Held(lanes []HeldLane) (held, offline int64) {
	for _, l := range lanes {
		held += l.Held
		if !l.Present {
			offline += l.Held
		}
	}
	return held, offline
}

// ListHeld reads the held resources in one snapshot with one database
// time: unreleased allocations (one owing a leftover cleanup stays
// unreleased) and unreleased placements without one, by the node that
// holds them, with its presence by the node_present rule (the same 45 s
// and owner-epoch predicate as placement, whatever the provider's
// readiness). An offline node's resources stay held: nothing here
// releases anything.
func (s *Reader) ListHeld(ctx context.Context) ([]HeldLane, error) {
	return fetchRows("list held", func() ([]db.ListHeldRow, error) { return s.q.ListHeld(ctx) }, func(r db.ListHeldRow) HeldLane {
		l := HeldLane{Held: r.Held, Present: r.Present}
		if r.NodeID != nil {
			l.Node = *r.NodeID
		}
		return l
	})
}

// RecordResetProgress records active reset id's held snapshot when it
// changed.
func (s *Owner) RecordResetProgress(ctx context.Context, id uuid.UUID, held, offline int64) error {
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		_, err := q.RecordResetProgress(ctx, db.RecordResetProgressParams{ID: id, Held: held, HeldOffline: offline})
		return err
	})
	if err != nil {
		return wrap("record reset progress", err)
	}
	return nil
}

// Finalized is what a reset's final transaction cleared.
type Finalized struct {
	Reset Reset
	// RetiredNodes are the nodes it retired, RevokedTokens how many unused
	// enrollment tokens it revoked.
	RetiredNodes  []uuid.UUID
	RevokedTokens int64
}

// FinalizeReset clears the deployment at the end of reset r (phase
// finalizing), in one transaction: the deployment row's lock, a recheck
// of the held snapshot under it (anything held: the reset moves back to
// draining and the error is ErrResetHeld), then no current generation and
// no serving pin, the generation floor at a new empty generation above
// every committed one, the admission fence lifted, every enabled node
// retired and every unused enrollment token revoked, the reset done, and
// its record: one node.retire per node and then reset.finish (event id
// eventID, the retirements' parent), with the reset's provenance. The lifecycle lanes are drained by
// the caller, outside this transaction; no Session lock is taken here.
func (s *Owner) FinalizeReset(ctx context.Context, r Reset, eventID uuid.UUID) (Finalized, error) {
	const op = "finalize reset"
	var out Finalized
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		if _, err := q.LockDeployment(ctx); err != nil {
			return err
		}
		rows, err := q.ListHeld(ctx)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			return ErrResetHeld
		}
		floor, err := q.ClearDeployment(ctx)
		if err != nil {
			return err
		}
		if out.RetiredNodes, err = q.RetireNodesForReplacement(ctx); err != nil {
			return err
		}
		if out.RevokedTokens, err = q.RevokeUnusedEnrollmentTokens(ctx); err != nil {
			return err
		}
		row, err := q.FinishReset(ctx, db.FinishResetParams{ID: r.ID, EmptyGeneration: pgtype.Int8{Int64: floor, Valid: true}})
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("the reset is not finalizing: %w", errdefs.ErrFenced)
		}
		if err != nil {
			return err
		}
		out.Reset = resetFromRow(row)
		// The retirements first, so the trail's last event of the reset
		// is its finish.
		prov := r.Provenance()
		child := prov.WithParent(eventID)
		for _, id := range out.RetiredNodes {
			if err := recordNodeState(ctx, q, child, uuid.NewSHA1(eventID, id[:]), id, NodeEnabled, NodeRetired,
				map[string]any{"reset": r.ID.String()}); err != nil {
				return err
			}
		}
		return recordAudit(ctx, q, prov, AuditEntry{
			ID: eventID, Kind: AuditDecision, Action: "reset.finish", Resource: "resets/" + r.ID.String(), Outcome: "ok",
			Detail: map[string]any{
				"empty_generation": floor, "sessions_archived": out.Reset.SessionsArchived,
				"nodes_retired": len(out.RetiredNodes), "tokens_revoked": out.RevokedTokens,
			},
		})
	})
	if errors.Is(err, ErrResetHeld) {
		// Back to draining, in its own transaction: the recheck's answer
		// stands whatever this write finds.
		if merr := s.MoveReset(ctx, r.ID, ResetFinalizing, ResetDraining); merr != nil && !errdefs.IsFenced(merr) {
			return Finalized{}, wrap(op, errors.Join(err, merr))
		}
	}
	if err != nil {
		return Finalized{}, wrap(op, err)
	}
	return out, nil
}

// FailExpiredReset ends active reset r failed (ResetFailureDeadline) when
// its deadline passed on the database clock, in one transaction under the
// deployment row's lock: the admission fence is lifted (the committed
// provider stays; archived Sessions stay archived) and reset.finish is
// recorded with the failure as its outcome (event id eventID). It reports
// whether it failed r; false when the deadline has not passed or r ended.
func (s *Owner) FailExpiredReset(ctx context.Context, r Reset, eventID uuid.UUID) (bool, error) {
	const op = "fail expired reset"
	failed := false
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		if _, err := q.LockDeployment(ctx); err != nil {
			return err
		}
		row, err := q.FailExpiredReset(ctx, db.FailExpiredResetParams{ID: r.ID, FailureCode: optText(ResetFailureDeadline)})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := q.SetDeploymentReset(ctx, nil); err != nil {
			return err
		}
		failed = true
		return recordAudit(ctx, q, r.Provenance(), AuditEntry{
			ID: eventID, Kind: AuditDecision, Action: "reset.finish", Resource: "resets/" + r.ID.String(),
			Outcome: ResetFailureDeadline,
			Detail:  map[string]any{"sessions_archived": row.SessionsArchived, "held": row.Held, "held_offline": row.HeldOffline},
		})
	})
	if err != nil {
		return false, wrap(op, err)
	}
	return failed, nil
}

// resetFence is ErrDeploymentResetting while a reset is active, for a
// deployment change in a transaction that holds the deployment row's lock.
func resetFence(ctx context.Context, q *db.Queries) error {
	f, err := q.GetDeploymentFence(ctx)
	if err != nil {
		return err
	}
	if f.ResetID != nil {
		return ErrDeploymentResetting
	}
	return nil
}

// lockDeploymentChange takes the deployment row's lock for a deployment
// change (a commit, a replacement) and returns the current generation
// (LockDeployment); ErrDeploymentResetting while a reset is active.
func lockDeploymentChange(ctx context.Context, q *db.Queries) (int64, error) {
	current, err := q.LockDeployment(ctx)
	if err != nil {
		return 0, err
	}
	return current, resetFence(ctx, q)
}
