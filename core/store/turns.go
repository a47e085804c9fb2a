package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/core/store/pgerr"
	"berth.dev/sandbox/errdefs"
)

// TurnState is a Turn's state (see migrations/0008_runtime_turns.sql).
type TurnState string

// The Turn states.
const (
	TurnQueued      TurnState = "queued"
	TurnRunning     TurnState = "running"
	TurnCompleted   TurnState = "completed"
	TurnFailed      TurnState = "failed"
	TurnCancelled   TurnState = "cancelled"
	TurnTimedOut    TurnState = "timed_out"
	TurnUnconfirmed TurnState = "unconfirmed"
)

// Terminal reports whether the state is final.
func (s TurnState) Terminal() bool { return s != TurnQueued && s != TurnRunning }

// The output streams of turn_output.stream.
const (
	StreamStdout int16 = 1
	StreamStderr int16 = 2
)

// MaxOutputChunk bounds one recorded output chunk (bytes).
const MaxOutputChunk = 64 << 10

// ErrSessionNotActive is the class (errdefs.ErrFailedPrecondition) of a
// SubmitTurn to a Session whose deletion was requested: a refusal (reason
// session_deleting) that tells the caller what to do.
var ErrSessionNotActive error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "session_deleting",
	"the session is being deleted: create a new session")

// ErrEnvironmentEnded is the class (errdefs.ErrFailedPrecondition) of a
// SubmitTurn to a Session whose Environment ended (failed or expired,
// see Termination): a refusal (reason environment_ended) that tells the
// caller what to do.
var ErrEnvironmentEnded error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "environment_ended",
	"the session's environment has ended: delete the session and create a new one")

// ErrTurnProtocol is the class (errdefs.ErrFailedPrecondition) of a
// Runtime report that does not fit the Turn: not running on that
// connection, output out of order or beyond its bound.
var ErrTurnProtocol = fmt.Errorf("turn report out of protocol: %w", errdefs.ErrFailedPrecondition)

// Turn is one command run in a Session's Environment.
type Turn struct {
	ID        uuid.UUID
	Seq       int64
	SessionID uuid.UUID
	RequestID uuid.UUID
	// RequestDigest identifies the submitted request, so a retry with the
	// same request id is told from a different Turn.
	RequestDigest []byte
	State         TurnState
	// Argv or ShellScript (exactly one) is the command.
	Argv             []string
	ShellScript      *string
	WorkingDirectory string
	// Input is the environment and stdin, sealed by the caller.
	Input         SealedCredential
	Timeout       time.Duration
	QueueDeadline time.Time
	// QueueTimeout is the submitted bound on the wait for a Runtime: the
	// queue deadline less the submission, both from the one database
	// clock reading of the insert (to the millisecond it was given in).
	QueueTimeout   time.Duration
	MaxOutputBytes int64
	ConnectionID   *uuid.UUID
	ExitCode       *int32
	Signal         int32
	FailureCode    string
	// StdoutBytes and StderrBytes are what the process produced;
	// *Recorded what Core kept.
	StdoutBytes, StderrBytes       int64
	StdoutRecorded, StderrRecorded int64
	OutputTruncated                bool
	CreatedAt                      time.Time
	DispatchedAt, StartedAt        *time.Time
	EndedAt, CancelRequestedAt     *time.Time
}

func turnFromRow(r db.Turn) Turn {
	t := Turn{
		ID: r.ID, Seq: r.Seq, SessionID: r.SessionID, RequestID: r.RequestID, RequestDigest: r.RequestDigest,
		State: TurnState(r.State), Argv: r.Argv, WorkingDirectory: r.WorkingDirectory,
		Input:   SealedCredential{Ciphertext: r.InputCiphertext, Nonce: r.InputNonce},
		Timeout: time.Duration(r.TimeoutMs) * time.Millisecond, QueueDeadline: r.QueueDeadline,
		MaxOutputBytes: r.MaxOutputBytes, ConnectionID: r.ConnectionID, Signal: r.Signal,
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
		StdoutRecorded: r.StdoutRecorded, StderrRecorded: r.StderrRecorded, OutputTruncated: r.OutputTruncated,
		CreatedAt: r.CreatedAt, DispatchedAt: r.DispatchedAt, StartedAt: r.StartedAt, EndedAt: r.EndedAt,
		CancelRequestedAt: r.CancelRequestedAt,
		QueueTimeout:      r.QueueDeadline.Sub(r.CreatedAt).Round(time.Millisecond),
	}
	if r.ShellScript.Valid {
		s := r.ShellScript.String
		t.ShellScript = &s
	}
	if r.ExitCode.Valid {
		c := r.ExitCode.Int32
		t.ExitCode = &c
	}
	if r.FailureCode.Valid {
		t.FailureCode = r.FailureCode.String
	}
	return t
}

// SubmitTurnParams is the input of SubmitTurn; every id and the sealed
// input are the caller's.
type SubmitTurnParams struct {
	ID            uuid.UUID
	SessionID     uuid.UUID
	RequestID     uuid.UUID
	RequestDigest []byte
	// Argv or ShellScript, exactly one.
	Argv             []string
	ShellScript      *string
	WorkingDirectory string
	Input            SealedCredential
	Timeout          time.Duration
	// QueueTimeout bounds the wait for a Runtime (database clock).
	QueueTimeout   time.Duration
	MaxOutputBytes int64
}

func (p SubmitTurnParams) validate() error {
	switch {
	case p.ID == uuid.Nil:
		return errdefs.Invalid("id", "must be set")
	case p.SessionID == uuid.Nil:
		return errdefs.Invalid("session_id", "must be set")
	case p.RequestID == uuid.Nil:
		return errdefs.Invalid("request_id", "must be set")
	case len(p.RequestDigest) != 32:
		return errdefs.Invalid("request_digest", "must be 32 bytes")
	case (p.Argv == nil) == (p.ShellScript == nil):
		return errdefs.Invalid("command", "exactly one of argv and shell_script")
	case len(p.Input.Nonce) != sealNonceLen || len(p.Input.Ciphertext) < sealTagLen:
		return errdefs.Invalid("input", "must be sealed")
	case p.Timeout < time.Millisecond:
		return errdefs.Invalid("timeout", "must be at least a millisecond")
	case p.QueueTimeout < time.Millisecond:
		return errdefs.Invalid("queue_timeout", "must be at least a millisecond")
	case p.MaxOutputBytes <= 0:
		return errdefs.Invalid("max_output_bytes", "must be positive")
	}
	return nil
}

// SubmitTurn queues a Turn for an active Session. Request ids are unique
// per Session: a retry with the same Session, request id and digest
// returns the first Turn (created false) and writes nothing; the same
// request id with another digest is ErrExists, and in another Session it
// is another Turn.
//
// A retry that races the first submission (both found no Turn, one insert
// won) is a retry all the same: the loser's insert violates the request
// id's uniqueness once the winner has committed, and SubmitTurn then runs
// its transaction again, which finds the winner's Turn and compares it as
// above. So concurrent identical submissions all return the one Turn.
func (s *Admin) SubmitTurn(ctx context.Context, p SubmitTurnParams) (t Turn, created bool, err error) {
	if err := p.validate(); err != nil {
		return Turn{}, false, fmt.Errorf("submit turn: %w", err)
	}
	t, created, err = s.submitTurn(ctx, p)
	if errors.Is(err, errInsertRaced) {
		t, created, err = s.submitTurn(ctx, p)
	}
	if err != nil {
		return Turn{}, false, fmt.Errorf("submit turn: %w", err)
	}
	return t, created, nil
}

// errInsertRaced marks a Turn insert that lost to a concurrent one (a
// unique violation): the transaction had no effect and is run once more.
// A second loss, which needs a row that vanished in between, is ErrExists.
var errInsertRaced = fmt.Errorf("a concurrent submission inserted first: %w", errdefs.ErrExists)

// submitTurn is one attempt of SubmitTurn.
func (s *Admin) submitTurn(ctx context.Context, p SubmitTurnParams) (t Turn, created bool, err error) {
	err = s.inTx(ctx, func(q *db.Queries) error {
		prev, err := q.GetTurnByRequestID(ctx, db.GetTurnByRequestIDParams{SessionID: p.SessionID, RequestID: p.RequestID})
		switch {
		case err == nil:
			if !bytes.Equal(prev.RequestDigest, p.RequestDigest) {
				return fmt.Errorf("request_id was used for another turn: %w", errdefs.ErrExists)
			}
			t = turnFromRow(prev)
			return nil
		case !errors.Is(pgerr.Classify(err), errdefs.ErrNotFound):
			return err
		}
		env, err := lockLiveSession(ctx, q, p.SessionID)
		if err != nil {
			return err
		}
		var script pgtype.Text
		if p.ShellScript != nil {
			script = pgtype.Text{String: *p.ShellScript, Valid: true}
		}
		row, err := q.InsertTurn(ctx, db.InsertTurnParams{
			ID: p.ID, SessionID: p.SessionID, RequestID: p.RequestID, RequestDigest: p.RequestDigest,
			Argv: p.Argv, ShellScript: script, WorkingDirectory: p.WorkingDirectory,
			InputCiphertext: p.Input.Ciphertext, InputNonce: p.Input.Nonce,
			TimeoutMs: p.Timeout.Milliseconds(), QueueTimeoutMs: p.QueueTimeout.Milliseconds(),
			MaxOutputBytes: p.MaxOutputBytes,
		})
		if errors.Is(pgerr.Classify(err), errdefs.ErrExists) {
			return errInsertRaced
		}
		if err != nil {
			return err
		}
		t, created = turnFromRow(row), true
		return wakeForWork(ctx, q, env.ID)
	})
	return t, created, err
}

// lockLiveSession takes Session id's share lock (so the caller's insert
// serializes with terminal cleanup and capture admission) and returns its
// Environment: ErrSessionArchived, ErrSessionNotActive or
// ErrEnvironmentEnded when new work may not be queued on it.
func lockLiveSession(ctx context.Context, q *db.Queries, id uuid.UUID) (db.Environment, error) {
	sess, err := q.LockSessionShared(ctx, id)
	if err != nil {
		return db.Environment{}, err
	}
	switch SessionState(sess.State) {
	case SessionActive:
	case SessionArchived:
		return db.Environment{}, ErrSessionArchived
	default:
		return db.Environment{}, ErrSessionNotActive
	}
	env, err := q.GetEnvironmentBySession(ctx, id)
	if err != nil {
		return db.Environment{}, err
	}
	if env.TerminalCause.Valid {
		return db.Environment{}, ErrEnvironmentEnded
	}
	return env, nil
}

// wakeForWork notifies the node's worker of Environment env's compute
// when it is not running: work queued for a suspended (or suspending)
// Session is its wake, and its node's worker restores it (or aborts the
// suspension) at once, not at its next scan.
func wakeForWork(ctx context.Context, q *db.Queries, env uuid.UUID) error {
	alloc, err := q.GetUnreleasedAllocationForEnvironment(ctx, env)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	case ComputePhase(alloc.ComputePhase) != PhaseRunning:
		return notifyNodeWork(ctx, q, laneOf(alloc.NodeID))
	}
	return nil
}

// GetTurn returns a Turn; ErrNotFound when there is none.
func (s *Reader) GetTurn(ctx context.Context, id uuid.UUID) (Turn, error) {
	row, err := s.q.GetTurn(ctx, id)
	if err != nil {
		return Turn{}, wrap("get turn", err)
	}
	return turnFromRow(row), nil
}

// ListTurns returns up to limit (1 to MaxPageSize+1) of a Session's
// Turns after seq afterSeq, in submission order.
func (s *Reader) ListTurns(ctx context.Context, sessionID uuid.UUID, afterSeq int64, limit int) ([]Turn, error) {
	return listPage("list turns", limit, func(n int32) ([]db.Turn, error) {
		return s.q.ListTurns(ctx, db.ListTurnsParams{SessionID: sessionID, AfterSeq: afterSeq, PageSize: n})
	}, turnFromRow)
}

// ClaimNextTurn moves the first queued Turn of c's Session to running on
// c (see the query for every condition); ok is false when there is
// nothing to run now. A claimed Turn is never claimed again.
func (s *Owner) ClaimNextTurn(ctx context.Context, c RuntimeConn) (t Turn, ok bool, err error) {
	epoch, err := epochParam(s.epoch)
	if err != nil {
		return Turn{}, false, err
	}
	conn, err := c.param()
	if err != nil {
		return Turn{}, false, fmt.Errorf("claim turn: %w", err)
	}
	row, err := s.q.ClaimNextTurn(ctx, db.ClaimNextTurnParams{SessionID: c.session, ConnectionID: &conn, OwnerEpoch: epoch})
	if err != nil {
		err = pgerr.Classify(err)
		// No row: nothing queued; a unique violation: another claim won.
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrExists) {
			return Turn{}, false, nil
		}
		return Turn{}, false, fmt.Errorf("claim turn: %w", err)
	}
	return turnFromRow(row), true, nil
}

// MarkTurnStarted records that the Runtime started the Turn.
func (s *Runtime) MarkTurnStarted(ctx context.Context, id uuid.UUID, c RuntimeConn) (Turn, error) {
	conn, err := c.param()
	if err != nil {
		return Turn{}, fmt.Errorf("mark turn started: %w", err)
	}
	row, err := s.q.MarkTurnStarted(ctx, db.MarkTurnStartedParams{ID: id, ConnectionID: &conn})
	if err != nil {
		return Turn{}, protocolErr("mark turn started", err)
	}
	return turnFromRow(row), nil
}

// AppendTurnOutput records one chunk of a running Turn's output: only from
// the connection it runs on, only at the stream's next offset and within
// the Turn's bound; otherwise ErrTurnProtocol and nothing is written.
func (s *Runtime) AppendTurnOutput(ctx context.Context, id uuid.UUID, c RuntimeConn, stream int16, offset int64, data []byte) error {
	conn, err := c.param()
	if err != nil {
		return fmt.Errorf("append turn output: %w", err)
	}
	if stream != StreamStdout && stream != StreamStderr {
		return errdefs.Invalid("stream", "must be stdout or stderr")
	}
	if len(data) == 0 || len(data) > MaxOutputChunk {
		return errdefs.Invalid("data", "must be 1 to 65536 bytes")
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		if _, err := q.AdvanceTurnOutput(ctx, db.AdvanceTurnOutputParams{
			ID: id, ConnectionID: &conn, Stream: stream, ByteOffset: offset, Length: int64(len(data)),
		}); err != nil {
			return err
		}
		return q.InsertTurnOutput(ctx, db.InsertTurnOutputParams{TurnID: id, Stream: stream, ByteOffset: offset, Data: data})
	})
	if err != nil {
		return protocolErr("append turn output", err)
	}
	return nil
}

// TurnResult is a Runtime's report of how a Turn ended.
type TurnResult struct {
	// State is terminal: completed, failed, cancelled or timed_out.
	State       TurnState
	ExitCode    *int32
	Signal      int32
	FailureCode string
	// StdoutBytes and StderrBytes are what the process produced.
	StdoutBytes, StderrBytes int64
	Truncated                bool
}

// FinishTurn records a Turn's result from the connection it runs on;
// ErrTurnProtocol when it does not run there (any more).
func (s *Runtime) FinishTurn(ctx context.Context, id uuid.UUID, c RuntimeConn, r TurnResult) (Turn, error) {
	connectionID, err := c.param()
	if err != nil {
		return Turn{}, fmt.Errorf("finish turn: %w", err)
	}
	switch r.State {
	case TurnCompleted:
		if r.ExitCode == nil {
			return Turn{}, errdefs.Invalid("exit_code", "required for a completed turn")
		}
	case TurnFailed:
		if r.FailureCode == "" {
			return Turn{}, errdefs.Invalid("failure_code", "required for a failed turn")
		}
	case TurnCancelled, TurnTimedOut:
	default:
		return Turn{}, errdefs.Invalid("state", "must be completed, failed, cancelled or timed_out")
	}
	if r.StdoutBytes < 0 || r.StderrBytes < 0 {
		return Turn{}, errdefs.Invalid("output_bytes", "must not be negative")
	}
	p := db.FinishTurnParams{
		ID: id, ConnectionID: &connectionID, State: string(r.State), Signal: r.Signal,
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes, Truncated: r.Truncated,
	}
	if r.ExitCode != nil {
		p.ExitCode = pgtype.Int4{Int32: *r.ExitCode, Valid: true}
	}
	if r.FailureCode != "" {
		p.FailureCode = pgtype.Text{String: r.FailureCode, Valid: true}
	}
	row, err := s.q.FinishTurn(ctx, p)
	if err != nil {
		return Turn{}, protocolErr("finish turn", err)
	}
	return turnFromRow(row), nil
}

// RequestTurnCancel records a cancellation request and returns the Turn:
// a queued Turn is cancelled at once, a running one keeps running until
// its Runtime reports, a terminal one is returned unchanged.
func (s *Admin) RequestTurnCancel(ctx context.Context, id uuid.UUID) (Turn, error) {
	row, err := s.q.RequestTurnCancel(ctx, id)
	if err == nil {
		return turnFromRow(row), nil
	}
	if !errors.Is(pgerr.Classify(err), errdefs.ErrNotFound) {
		return Turn{}, wrap("cancel turn", err)
	}
	return s.reader().GetTurn(ctx, id)
}

// TurnRef names a Turn and its Session.
type TurnRef struct {
	ID, SessionID uuid.UUID
}

// ExpireQueuedTurns fails the queued Turns whose queue deadline passed
// (runtime_not_ready) or whose Session is being deleted (session_deleted),
// on the database clock, and returns them. Only the current owner acts.
func (s *Owner) ExpireQueuedTurns(ctx context.Context) ([]TurnRef, error) {
	return sweepTurns(ctx, "expire queued turns", s.epoch, s.q.ExpireQueuedTurns,
		func(r db.ExpireQueuedTurnsRow) TurnRef { return TurnRef{ID: r.ID, SessionID: r.SessionID} })
}

// UnconfirmOrphanedTurns ends the running Turns whose connection is closed
// or was accepted by a superseded owner, and returns them. Only the
// current owner acts.
func (s *Owner) UnconfirmOrphanedTurns(ctx context.Context) ([]TurnRef, error) {
	return sweepTurns(ctx, "unconfirm orphaned turns", s.epoch, s.q.UnconfirmOrphanedTurns,
		func(r db.UnconfirmOrphanedTurnsRow) TurnRef { return TurnRef{ID: r.ID, SessionID: r.SessionID} })
}

// sweepTurns runs one of the owner's Turn sweeps and names what it changed.
func sweepTurns[R any](ctx context.Context, op string, ownerEpoch uint64,
	query func(context.Context, int64) ([]R, error), ref func(R) TurnRef) ([]TurnRef, error) {
	epoch, err := epochParam(ownerEpoch)
	if err != nil {
		return nil, err
	}
	return fetchRows(op, func() ([]R, error) { return query(ctx, epoch) }, ref)
}

// OutputChunk is one recorded chunk of a Turn's output.
type OutputChunk struct {
	Seq    int64
	Stream int16
	Offset int64
	Data   []byte
}

// ReadTurnOutput returns up to limit chunks recorded after seq afterSeq,
// in arrival order.
func (s *Reader) ReadTurnOutput(ctx context.Context, id uuid.UUID, afterSeq int64, limit int) ([]OutputChunk, error) {
	n, err := pageSizeParam(limit)
	if err != nil {
		return nil, fmt.Errorf("read turn output: %w", err)
	}
	rows, err := s.q.ReadTurnOutput(ctx, db.ReadTurnOutputParams{TurnID: id, AfterSeq: afterSeq, PageSize: n})
	if err != nil {
		return nil, wrap("read turn output", err)
	}
	out := make([]OutputChunk, len(rows))
	for i, r := range rows {
		out[i] = OutputChunk{Seq: r.Seq, Stream: r.Stream, Offset: r.ByteOffset, Data: r.Data}
	}
	return out, nil
}

// protocolErr turns "no row" of a Runtime report into ErrTurnProtocol.
func protocolErr(op string, err error) error {
	err = pgerr.Classify(err)
	if errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("%s: %w", op, ErrTurnProtocol)
	}
	return fmt.Errorf("%s: %w", op, err)
}
