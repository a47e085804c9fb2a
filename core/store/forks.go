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

// A fork makes N new Sessions from the current filesystem of one running
// or suspended Session (migration 0034). CreateFork commits the fork and
// its children in one transaction; the source node's lifecycle worker
// captures a running source (ClaimForkCapture, RecordForkCaptured), the
// children's Creates are seeded from the snapshot, and the worker settles
// the fork once every child's Create is settled (FinishFork) or fails it
// (FailFork).

// ForkState is where a fork is (migration 0034).
type ForkState string

// The fork states.
const (
	ForkCapturing ForkState = "capturing"
	ForkReady     ForkState = "ready"
	ForkSettled   ForkState = "settled"
	ForkFailed    ForkState = "failed"
)

// MaxForkChildren bounds one fork's count (the forks table's CHECK):
// at least the 100 agent builders ask for, and small enough that the one
// transaction placing the children stays short (docs/sessions.md, "Fork").
const MaxForkChildren = 128

// The fixed failure codes of a failed fork, which its children not yet
// created end with.
const (
	// ForkFailureCapture: the capture of the running source failed.
	ForkFailureCapture = "fork_capture_failed"
	// ForkFailureSourceEnded: the source ended (deleted, archived, failed
	// or expired) before its capture.
	ForkFailureSourceEnded = "fork_source_ended"
)

// ErrForkSourceBusy is the class (errdefs.ErrFailedPrecondition) of a fork
// of a Session whose compute is between running and suspended (quiescing,
// suspending, restoring): nothing was written; the same request succeeds
// in a moment.
var ErrForkSourceBusy error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "fork_source_busy",
	"the session is being suspended or woken: retry the fork in a moment")

// ErrForkSourceNotReady is the class (errdefs.ErrFailedPrecondition) of a
// fork of a Session whose compute was never created (its Create is pending
// or unsettled): nothing was written.
var ErrForkSourceNotReady error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "fork_source_not_ready",
	"the session's sandbox is not created yet: fork it once GetSession shows it running")

// Fork is one fork (migration 0034).
type Fork struct {
	ID                 uuid.UUID
	SourceSessionID    uuid.UUID
	SourceAllocationID uuid.UUID
	NodeID             uuid.UUID
	RequestID          uuid.UUID
	Requested, Placed  int
	// UnplacedReason is the refusal reason that stopped the placement
	// before Requested ("" when all were placed).
	UnplacedReason string
	State          ForkState
	// CaptureOp is the Capture's operation id (nil for a borrowed
	// snapshot: the suspended source's own).
	CaptureOp        *uuid.UUID
	CaptureClaimedAt *time.Time
	Borrowed         bool
	// Snapshot is what the children are seeded from (zero while
	// capturing).
	Snapshot    sandbox.SnapshotIdentity
	FailureCode string
	CreatedAt   time.Time
	CapturedAt  *time.Time
	EndedAt     *time.Time
}

func forkFromRow(r db.Fork) Fork {
	return Fork{
		ID: r.ID, SourceSessionID: r.SourceSessionID, SourceAllocationID: r.SourceAllocationID, NodeID: r.NodeID,
		RequestID: r.RequestID, Requested: int(r.Requested), Placed: int(r.Placed), UnplacedReason: r.UnplacedReason,
		State: ForkState(r.State), CaptureOp: r.CaptureOp, CaptureClaimedAt: r.CaptureClaimedAt, Borrowed: r.Borrowed,
		Snapshot:    sandbox.SnapshotIdentity{ID: r.SnapshotID.String, Provenance: r.SnapshotProvenance.String},
		FailureCode: r.FailureCode.String, CreatedAt: r.CreatedAt, CapturedAt: r.CapturedAt, EndedAt: r.EndedAt,
	}
}

// ForkChild is what the caller minted for one child: its ids, request id
// and sealed device credential (as CreateSessionParams').
type ForkChild struct {
	SessionID, EnvironmentID, AllocationID, DeviceID, CreateReceipt, RequestID uuid.UUID
	CredentialDigest, CredentialCiphertext, CredentialNonce                    []byte
	DisplayName                                                                string
}

// ForkSessionParams is one ForkSession: the fork's ids, the source, and a
// minted child per requested Session (len(Children) is the count).
type ForkSessionParams struct {
	ForkID, CaptureOp, RequestID uuid.UUID
	SourceSessionID, ProjectID   uuid.UUID
	TenantID                     uuid.UUID
	MinCount                     int
	Children                     []ForkChild
	Generation                   int64
	Resources                    sandbox.Resources
	MaxActive                    int
}

func (p ForkSessionParams) validate() error {
	switch {
	case p.ForkID == uuid.Nil || p.CaptureOp == uuid.Nil || p.RequestID == uuid.Nil || p.SourceSessionID == uuid.Nil:
		return errdefs.Invalid("fork", "ids must not be the nil UUID")
	case len(p.Children) < 1 || len(p.Children) > MaxForkChildren:
		return errdefs.Invalid("count", fmt.Sprintf("must be 1 to %d", MaxForkChildren))
	case p.MinCount < 1 || p.MinCount > len(p.Children):
		return errdefs.Invalid("min_count", "must be 1 to count")
	}
	return nil
}

// ForkResult is what CreateFork committed (or a retry found).
type ForkResult struct {
	Fork     Fork
	Children []SessionBundle
	// Created is false for a retry that found the first call's fork.
	Created bool
}

// CreateFork commits, in one transaction, a fork of Session
// p.SourceSessionID and as many of p.Children as fit, each an ordinary
// Session bundle (CreateSession's rows) placed where CreateSession would
// place it, whose allocation carries the fork: its Create waits for the
// fork's snapshot on its node (the source's, or that node's seed) and is
// seeded from it. Under the source Session's share lock (so no
// suspension moves its compute meanwhile) the source must be active, its
// sandbox created and running or suspended: a running source owes a
// Capture (state capturing, operation p.CaptureOp; while it is owed the
// Session is not idle, so no suspension is armed), a suspended one lends
// its suspension snapshot (state ready, borrowed: its leftover deletion
// waits for the fork). Compute between the two is ErrForkSourceBusy, a
// sandbox not created ErrForkSourceNotReady; an ended Session is
// ErrSessionNotActive, ErrSessionArchived or ErrEnvironmentEnded.
//
// Children are placed one at a time in order, each under the project's
// load row and the node's, exactly as CreateSession places: the first
// that does not fit stops the placement, with its refusal's reason
// (no_ready_node_with_capacity or project_active_limit) recorded as the
// fork's UnplacedReason. Fewer than p.MinCount placed writes nothing and
// returns that refusal. A retry with the same RequestID returns the first
// call's fork and children (Created false) and writes nothing. It is a
// lifecycle write, fenced like CreateSession.
func (s *Owner) CreateFork(ctx context.Context, p ForkSessionParams) (ForkResult, error) {
	const op = "create fork"
	if err := p.validate(); err != nil {
		return ForkResult{}, fmt.Errorf("%s: %w", op, err)
	}
	var out ForkResult
	err := s.inTx(ctx, func(q *db.Queries) error {
		if err := q.LockSessionRequest(ctx, db.LockSessionRequestParams{ProjectID: p.ProjectID, RequestID: p.RequestID}); err != nil {
			return err
		}
		if err := fenceOwner(ctx, q, s.epoch); err != nil {
			return err
		}
		found, err := q.GetForkByRequest(ctx, db.GetForkByRequestParams{SourceSessionID: p.SourceSessionID, RequestID: p.RequestID})
		switch {
		case err == nil:
			out, err = committedFork(ctx, q, found)
			return err
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if err := admitGeneration(ctx, q, p.Generation); err != nil {
			return err
		}
		source, err := forkSource(ctx, q, p.SourceSessionID)
		if err != nil {
			return err
		}
		proj, err := admitProject(ctx, q, p.ProjectID, p.TenantID)
		if err != nil {
			return err
		}
		row, err := q.InsertFork(ctx, source.insertParams(p))
		if err != nil {
			return err
		}
		children, stop, err := placeForkChildren(ctx, q, p, proj, row)
		if err != nil {
			return err
		}
		if len(children) < p.MinCount {
			return stop
		}
		if row, err = q.UpdateForkPlaced(ctx, db.UpdateForkPlacedParams{ID: row.ID, Placed: int32(len(children)), UnplacedReason: refusalReason(stop)}); err != nil {
			return err
		}
		out = ForkResult{Fork: forkFromRow(row), Children: children, Created: true}
		// Every child's node is the source's or owes a seed.
		return notifySeedNodes(ctx, q, row)
	})
	if err != nil {
		return ForkResult{}, wrap(op, err)
	}
	return out, nil
}

// seedOperation is the operation id of fork's seed on node: a name UUID,
// so the fork's transaction derives it and a retry finds the same.
func seedOperation(fork, node uuid.UUID) uuid.UUID { return uuid.NewSHA1(fork, node[:]) }

// committedFork is a retried CreateFork's answer: the fork and its
// children as the first call committed them.
func committedFork(ctx context.Context, q *db.Queries, f db.Fork) (ForkResult, error) {
	sessions, err := q.ListForkChildSessions(ctx, &f.ID)
	if err != nil {
		return ForkResult{}, err
	}
	children, err := loadBundles(ctx, q, sessions)
	if err != nil {
		return ForkResult{}, err
	}
	return ForkResult{Fork: forkFromRow(f), Children: children}, nil
}

// forkOrigin is a fork's source as CreateFork found it under the Session
// lock.
type forkOrigin struct {
	alloc    db.Allocation
	node     uuid.UUID
	borrowed bool
}

// forkSource locks live Session id (shared) and reads what a fork of it
// takes: its running allocation on a node, running (to capture) or
// suspended (to borrow from).
func forkSource(ctx context.Context, q *db.Queries, id uuid.UUID) (forkOrigin, error) {
	env, err := lockLiveSession(ctx, q, id)
	if err != nil {
		return forkOrigin{}, err
	}
	a, err := q.GetUnreleasedAllocationForEnvironment(ctx, env.ID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return forkOrigin{}, ErrForkSourceNotReady
	case err != nil:
		return forkOrigin{}, err
	}
	if AllocationState(a.State) != AllocationRunning || !a.CreateSettled || a.NodeID == nil || a.DeviceRevokedAt != nil {
		return forkOrigin{}, ErrForkSourceNotReady
	}
	switch ComputePhase(a.ComputePhase) {
	case PhaseRunning:
		return forkOrigin{alloc: a, node: *a.NodeID}, nil
	case PhaseSuspended:
		return forkOrigin{alloc: a, node: *a.NodeID, borrowed: true}, nil
	}
	return forkOrigin{}, ErrForkSourceBusy
}

// insertParams is the fork row for p from o: capturing with p.CaptureOp,
// or ready with the suspension snapshot it borrows.
func (o forkOrigin) insertParams(p ForkSessionParams) db.InsertForkParams {
	f := db.InsertForkParams{
		ID: p.ForkID, SourceSessionID: p.SourceSessionID, SourceAllocationID: o.alloc.ID, NodeID: o.node,
		RequestID: p.RequestID, Requested: int32(len(p.Children)), Placed: int32(len(p.Children)),
		State: string(ForkCapturing), CaptureOp: &p.CaptureOp,
	}
	if o.borrowed {
		f.State, f.CaptureOp, f.Borrowed = string(ForkReady), nil, true
		f.SnapshotID, f.SnapshotProvenance = o.alloc.SnapshotID, o.alloc.SnapshotProvenance
	}
	return f
}

// placeForkChildren places p's children in order, each where
// CreateSession would place it (the least held node with room, under the
// project's and the node's load rows: the fork's own placements raise a
// node's count, so children spread), until one does not fit: it returns
// those placed and the refusal that stopped it (nil when all fit). A
// child on a node other than the source's owes that node a seed.
func placeForkChildren(ctx context.Context, q *db.Queries, p ForkSessionParams, proj db.Project, f db.Fork) ([]SessionBundle, error, error) {
	var placed []SessionBundle
	for i, c := range p.Children {
		if err := admitProjectLoad(ctx, q, proj); err != nil {
			if errors.Is(err, ErrProjectActiveLimit) {
				return placed, err, nil
			}
			return nil, nil, err
		}
		chosen, err := choosePlacementNode(ctx, q, CreateSessionParams{Generation: p.Generation, MaxActive: p.MaxActive, Resources: p.Resources})
		switch {
		case errors.Is(err, ErrNoCapacity):
			return placed, ErrNoCapacity, nil
		case err != nil:
			return nil, nil, err
		}
		if chosen.ID != f.NodeID {
			// A child on another node is created from that node's seed.
			if err := q.InsertForkSeed(ctx, db.InsertForkSeedParams{ForkID: f.ID, NodeID: chosen.ID, Operation: seedOperation(f.ID, chosen.ID)}); err != nil {
				return nil, nil, err
			}
		}
		b, err := insertSessionBundle(ctx, q, CreateSessionParams{
			RequestID: c.RequestID, ProjectID: p.ProjectID, TenantID: p.TenantID, DisplayName: c.DisplayName,
			SessionID: c.SessionID, EnvironmentID: c.EnvironmentID, AllocationID: c.AllocationID, DeviceID: c.DeviceID,
			CredentialDigest: c.CredentialDigest, CredentialCiphertext: c.CredentialCiphertext, CredentialNonce: c.CredentialNonce,
			CreateReceipt: c.CreateReceipt, Generation: p.Generation, Resources: p.Resources, MaxActive: p.MaxActive,
		}, chosen.ID)
		if err != nil {
			return nil, nil, err
		}
		if err := q.SetAllocationFork(ctx, db.SetAllocationForkParams{ID: b.Allocation.ID, ForkID: &f.ID, ForkIndex: pgtype.Int4{Int32: int32(i), Valid: true}}); err != nil {
			return nil, nil, err
		}
		b.Allocation.ForkID = &f.ID
		placed = append(placed, b)
	}
	return placed, nil, nil
}

// refusalReason is err's refusal reason, "" for nil.
func refusalReason(err error) string {
	var r *errdefs.Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// GetFork reads fork id. ErrNotFound when there is none.
func (s *Reader) GetFork(ctx context.Context, id uuid.UUID) (Fork, error) {
	r, err := s.q.GetFork(ctx, id)
	if err != nil {
		return Fork{}, wrap("get fork", err)
	}
	return forkFromRow(r), nil
}

// ListForkWorkForNode pages, by id after after, the forks of node nodeID
// its worker has work for: a capture owed or unconfirmed, and a ready
// fork whose every child's Create is settled.
func (s *Reader) ListForkWorkForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]Fork, error) {
	rows, err := s.q.ListForkWorkForNode(ctx, db.ListForkWorkForNodeParams{NodeID: nodeID, After: after, PageSize: int32(limit)})
	if err != nil {
		return nil, wrap("list fork work", err)
	}
	out := make([]Fork, len(rows))
	for i, r := range rows {
		out[i] = forkFromRow(r)
	}
	return out, nil
}

// ClaimForkCapture spends the capture receipt of fork id under op: only
// then may the one Capture be sent. When the source has ended (its
// Environment terminated or its device revoked), the fork fails
// ForkFailureSourceEnded instead, with its children not yet created
// (FailFork's rule), and the answer is ErrFenced. ErrFenced also when the
// receipt was spent or the fork moved on. The source Session's lock
// orders it with terminal cleanup.
func (s *Owner) ClaimForkCapture(ctx context.Context, id, op uuid.UUID) (Fork, error) {
	const name = "claim fork capture"
	var out Fork
	var ended bool
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		f, err := q.GetFork(ctx, id)
		if err != nil {
			return err
		}
		if _, err := q.LockSession(ctx, f.SourceSessionID); err != nil {
			return err
		}
		if ForkState(f.State) != ForkCapturing {
			return fmt.Errorf("fork %s: %w", f.State, errdefs.ErrFenced)
		}
		a, err := q.GetAllocation(ctx, f.SourceAllocationID)
		if err != nil {
			return err
		}
		switch {
		case a.DeviceRevokedAt != nil || AllocationState(a.State) != AllocationRunning:
			ended = true
			_, _, err := failFork(ctx, q, id, ForkFailureSourceEnded)
			return err
		case ComputePhase(a.ComputePhase) != PhaseRunning:
			// Not reached while the fork is capturing (its Session is not
			// idle, so no suspension is armed); fenced, never failed.
			return fmt.Errorf("source compute %s: %w", a.ComputePhase, errdefs.ErrFenced)
		}
		row, err := q.ClaimForkCapture(ctx, db.ClaimForkCaptureParams{ID: id, CaptureOp: &op})
		if err != nil {
			return noRowFenced(err)
		}
		out = forkFromRow(row)
		return nil
	})
	switch {
	case err != nil:
		return Fork{}, wrap(name, err)
	case ended:
		return Fork{}, fmt.Errorf("%s: the source ended: %w", name, errdefs.ErrFenced)
	}
	return out, nil
}

// RecordForkCaptured records the snapshot of fork id's claimed capture
// op: the fork is ready, and the workers of its node and of its seeds'
// nodes are woken for the children's Creates and the seeds' imports.
// ErrFenced unless the capture was claimed and not recorded.
func (s *Owner) RecordForkCaptured(ctx context.Context, id, op uuid.UUID, snap sandbox.SnapshotIdentity) (Fork, error) {
	if snap.ID == "" || snap.Provenance == "" {
		return Fork{}, fmt.Errorf("record fork captured: %w", errdefs.Invalid("snapshot", "is required"))
	}
	var out Fork
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		row, err := q.RecordForkCaptured(ctx, db.RecordForkCapturedParams{ID: id, CaptureOp: &op,
			SnapshotID: pgtype.Text{String: snap.ID, Valid: true}, SnapshotProvenance: pgtype.Text{String: snap.Provenance, Valid: true}})
		if err != nil {
			return noRowFenced(err)
		}
		out = forkFromRow(row)
		return notifySeedNodes(ctx, q, row)
	})
	if err != nil {
		return Fork{}, wrap("record fork captured", err)
	}
	return out, nil
}

// FailFork ends open fork id with code (ForkFailureCapture and the like):
// each child whose Create was never sent gets terminal cleanup with cause
// TerminalFailed and the same code, in the same transaction, so it ends
// FAILED and its receipt is spent. A child already created is not
// touched. It returns those cleanups. ErrFenced when the fork is not open.
func (s *Owner) FailFork(ctx context.Context, id uuid.UUID, code string) (Fork, []Termination, error) {
	if !validFailureCode(code) {
		return Fork{}, nil, fmt.Errorf("fail fork: %w", errdefs.Invalid("failure_code", "a lowercase code"))
	}
	var out Fork
	var terms []Termination
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		var err error
		out, terms, err = failFork(ctx, q, id, code)
		return err
	})
	if err != nil {
		return Fork{}, nil, wrap("fail fork", err)
	}
	return out, terms, nil
}

// failFork is FailFork in the caller's transaction.
func failFork(ctx context.Context, q *db.Queries, id uuid.UUID, code string) (Fork, []Termination, error) {
	row, err := q.FailFork(ctx, db.FailForkParams{ID: id, FailureCode: pgtype.Text{String: code, Valid: true}})
	if err != nil {
		return Fork{}, nil, noRowFenced(err)
	}
	envs, err := q.ListForkChildrenUncreated(ctx, db.ListForkChildrenUncreatedParams{ForkID: &id})
	if err != nil {
		return Fork{}, nil, err
	}
	terms, err := terminateChildren(ctx, q, envs, code)
	if err != nil {
		return Fork{}, nil, err
	}
	return forkFromRow(row), terms, nil
}

// terminateChildren is terminal cleanup, cause TerminalFailed with code,
// of each of a fork's children's Environments envs, each under its
// Session's lock, in the caller's transaction.
func terminateChildren(ctx context.Context, q *db.Queries, envs []uuid.UUID, code string) ([]Termination, error) {
	terms := make([]Termination, 0, len(envs))
	for _, env := range envs {
		e, err := q.GetEnvironment(ctx, env)
		if err != nil {
			return nil, err
		}
		if _, err := q.LockSession(ctx, e.SessionID); err != nil {
			return nil, err
		}
		t, err := terminate(ctx, q, env, TerminalFailed, code)
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	return terms, nil
}

// FinishFork settles ready fork id once every child's Create is settled: a
// captured snapshot becomes a leftover of the source allocation (the
// leftover scan deletes it, through DeleteSnapshot) unless the source's
// cleanup was requested (its Kill removes every snapshot of it); a
// borrowed one is released to its suspension. ErrFenced when a child's
// Create is still unsettled or the fork is not ready.
func (s *Owner) FinishFork(ctx context.Context, id uuid.UUID) (Fork, error) {
	var out Fork
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		row, err := q.SettleFork(ctx, id)
		if err != nil {
			return noRowFenced(err)
		}
		out = forkFromRow(row)
		if row.Borrowed {
			return nil
		}
		a, err := q.GetAllocation(ctx, row.SourceAllocationID)
		if err != nil {
			return err
		}
		if a.CleanupRequestedAt != nil || AllocationState(a.State) == AllocationReleased {
			return nil
		}
		if err := q.InsertLeftover(ctx, db.InsertLeftoverParams{AllocationID: a.ID, Kind: leftoverSnapshot,
			Identity: row.SnapshotID.String, Provenance: row.SnapshotProvenance.String}); err != nil {
			return err
		}
		return notifyNodeWork(ctx, q, row.NodeID)
	})
	if err != nil {
		return Fork{}, wrap("finish fork", err)
	}
	return out, nil
}
