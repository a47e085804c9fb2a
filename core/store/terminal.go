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

// TerminalCause is why an Environment's life ended, recorded by terminal
// cleanup (see Termination).
type TerminalCause string

// The terminal causes.
const (
	// TerminalDeleted: the admin deleted the Session (RequestSessionDeletion).
	TerminalDeleted TerminalCause = "deleted"
	// TerminalFailed: the Environment failed permanently (for example
	// FailureCreateFailed after MaxCreateAttempts settled Create failures).
	TerminalFailed TerminalCause = "failed"
	// TerminalExpired: the Environment's lifetime ended.
	TerminalExpired TerminalCause = "expired"
	// TerminalArchived: an administrator archived the Session
	// (ArchiveSession); the Environment is recorded expired.
	TerminalArchived TerminalCause = "archived"
)

// The fixed failure codes of the queued Turns that terminal cleanup ends,
// by cause. A queued Turn whose queue deadline had already passed ends
// runtime_not_ready instead, as the expiry sweep would have ended it: its
// original deadline keeps its meaning.
const (
	TurnFailureSessionDeleted     = "session_deleted"
	TurnFailureEnvironmentFailed  = "environment_failed"
	TurnFailureEnvironmentExpired = "environment_expired"
	TurnFailureSessionArchived    = "session_archived"
)

// turnFailure is the failure code of the queued Turns cause ends.
func (c TerminalCause) turnFailure() string {
	switch c {
	case TerminalFailed:
		return TurnFailureEnvironmentFailed
	case TerminalExpired:
		return TurnFailureEnvironmentExpired
	case TerminalArchived:
		return TurnFailureSessionArchived
	}
	return TurnFailureSessionDeleted
}

// Termination is what one terminal cleanup recorded. Terminal cleanup is
// one transaction of the Owner: it revokes the device of the
// Environment's unreleased allocation (AcceptRuntime refuses it from then
// on and no new Turn is claimed for it), records the Environment's
// terminal cause, ends the queued Turns with the cause's fixed failure
// code, requests cancellation of the running Turn (cancel_requested, which
// the gateway forwards to the Runtime; its result still counts) and
// requests cleanup of the allocation, which spends an unclaimed create
// receipt. All of it commits or none of it does. The lifecycle worker
// calls Kill only for an allocation whose cleanup was requested, so Kill
// always follows a committed terminal cleanup; the allocation is released
// only after confirmed cleanup and settled creation (Release).
type Termination struct {
	EnvironmentID uuid.UUID
	SessionID     uuid.UUID
	// Cause is the recorded cause: the first terminal cleanup's, kept by
	// any later one.
	Cause TerminalCause
	// TerminatedAt is when the first terminal cleanup committed (database
	// clock).
	TerminatedAt time.Time
	// Revoked is the allocation whose device this cleanup revoked (or
	// found revoked); uuid.Nil when the Environment has none unreleased.
	Revoked uuid.UUID
	// SettledTurns are the queued Turns this cleanup ended.
	SettledTurns []uuid.UUID
	// CancelRequested is the running Turn whose cancellation is requested.
	CancelRequested []uuid.UUID
	// FailedFileOperations are the pending and running file operations
	// this cleanup ended.
	FailedFileOperations []uuid.UUID
	// Cleanup is the allocation whose cleanup is requested; the zero
	// Allocation when the Environment has none unreleased (its placement
	// is released at once then).
	Cleanup Allocation
}

// TerminateEnvironment is terminal cleanup (see Termination) of a failed
// or expired Environment: cause TerminalFailed with failureCode (the
// Environment's recorded reason, like FailureCreateFailed) or
// TerminalExpired without one. The Session stays; its Environment ends.
// Calling it again changes nothing and returns the recorded cause (an
// Environment keeps its first terminal cause). A deletion is
// RequestSessionDeletion, never this. ErrNotFound when there is no such
// Environment; ErrInvalid for a malformed cause or code. It is a
// lifecycle write, fenced like CreateSession.
func (s *Owner) TerminateEnvironment(ctx context.Context, environmentID uuid.UUID, cause TerminalCause, failureCode string) (Termination, error) {
	const op = "terminate environment"
	switch {
	case cause == TerminalFailed && !validFailureCode(failureCode):
		return Termination{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("failure_code", "required for a failed environment: a lowercase code"))
	case cause == TerminalExpired && failureCode != "":
		return Termination{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("failure_code", "only a failed environment has one"))
	case cause != TerminalFailed && cause != TerminalExpired:
		return Termination{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("cause", "must be failed or expired"))
	}
	var out Termination
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		env, err := q.GetEnvironment(ctx, environmentID)
		if err != nil {
			return err
		}
		// The Session lock first, as RequestSessionDeletion and Release
		// take it.
		if _, err := q.LockSession(ctx, env.SessionID); err != nil {
			return err
		}
		out, err = terminate(ctx, q, env.ID, cause, failureCode)
		return err
	})
	if err != nil {
		return Termination{}, wrap(op, err)
	}
	return out, nil
}

// terminate is terminal cleanup inside the caller's transaction, which
// holds the Session lock. It locks the Environment, then the allocation,
// then the Turns: the order of every terminal cleanup.
func terminate(ctx context.Context, q *db.Queries, environmentID uuid.UUID, cause TerminalCause, failureCode string) (Termination, error) {
	env, err := q.LockEnvironment(ctx, environmentID)
	if err != nil {
		return Termination{}, err
	}
	out := Termination{EnvironmentID: env.ID, SessionID: env.SessionID}

	// Revoke the device first: from here on AcceptRuntime refuses it.
	revoked, err := q.RevokeEnvironmentDevice(ctx, env.ID)
	if err != nil {
		return Termination{}, err
	}
	if len(revoked) > 0 {
		out.Revoked = revoked[0]
	}

	// The Environment's terminal cause: the first one stays.
	if !env.TerminalCause.Valid {
		p := db.RecordEnvironmentTerminalParams{
			ID: env.ID, State: env.State, FailureCode: env.FailureCode,
			TerminalCause: pgtype.Text{String: string(cause), Valid: true},
		}
		switch cause {
		case TerminalFailed:
			if EnvironmentState(env.State) != EnvironmentFailed {
				p.State = string(EnvironmentFailed)
				p.FailureCode = pgtype.Text{String: failureCode, Valid: true}
			}
		case TerminalExpired, TerminalArchived:
			if EnvironmentState(env.State) != EnvironmentFailed {
				p.State, p.FailureCode = string(EnvironmentExpired), pgtype.Text{}
			}
		}
		if env, err = q.RecordEnvironmentTerminal(ctx, p); err != nil {
			return Termination{}, err
		}
	}
	out.Cause = TerminalCause(env.TerminalCause.String)
	if env.TerminatedAt != nil {
		out.TerminatedAt = *env.TerminatedAt
	}

	// Pending input ends with the cause's code; the running Turn is asked
	// to cancel. Turn-state SQL stays in the Turn queries.
	if out.SettledTurns, err = q.SettleQueuedTurnsOfSession(ctx, db.SettleQueuedTurnsOfSessionParams{
		SessionID: env.SessionID, FailureCode: out.Cause.turnFailure(),
	}); err != nil {
		return Termination{}, err
	}
	if out.CancelRequested, err = q.RequestCancelRunningTurnsOfSession(ctx, env.SessionID); err != nil {
		return Termination{}, err
	}
	// File operations end with the same code; the admin call that waits on
	// one sees it, and the revoked connection's end stops its bytes.
	if out.FailedFileOperations, err = q.FailFileOperationsOfSession(ctx, db.FailFileOperationsOfSessionParams{
		SessionID: env.SessionID, FailureCode: out.Cause.turnFailure(),
	}); err != nil {
		return Termination{}, err
	}

	alloc, err := q.GetUnreleasedAllocationForEnvironment(ctx, env.ID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// No compute is owned: the reservation ends.
		return out, q.ReleasePlacement(ctx, env.ID)
	case err != nil:
		return Termination{}, err
	}
	out.Cleanup, err = requestCleanup(ctx, q, alloc.ID)
	if err != nil {
		return Termination{}, err
	}
	// The node's worker cleans up at once, not at its next scan.
	return out, notifyNodeWork(ctx, q, laneOf(alloc.NodeID))
}

// validFailureCode reports whether code fits environments.failure_code.
func validFailureCode(code string) bool {
	if code == "" || len(code) > 64 || code[0] < 'a' || code[0] > 'z' {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
