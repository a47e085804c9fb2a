package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// NodePageSize is the page size of the per-node lifecycle scans
// (ListAllocationWorkForNode, ListPendingForNode).
const NodePageSize = 32

// AllocationState is an allocation's lifecycle state.
type AllocationState string

// The allocation states (see migrations/0004_sessions_allocations.sql).
const (
	AllocationAllocated        AllocationState = "allocated"
	AllocationCreateDispatched AllocationState = "create_dispatched"
	AllocationCreateUnknown    AllocationState = "create_unknown"
	AllocationRunning          AllocationState = "running"
	AllocationCreateFailed     AllocationState = "create_failed"
	AllocationCleanupRequested AllocationState = "cleanup_requested"
	AllocationCleanupUnknown   AllocationState = "cleanup_unknown"
	AllocationCleanupConfirmed AllocationState = "cleanup_confirmed"
	AllocationReleased         AllocationState = "released"
)

// inCleanup reports whether cleanup was requested (and the allocation is
// not released).
func (s AllocationState) inCleanup() bool {
	switch s {
	case AllocationCleanupRequested, AllocationCleanupUnknown, AllocationCleanupConfirmed:
		return true
	}
	return false
}

// Allocation is private compute ownership of one Environment on one node.
type Allocation struct {
	ID            uuid.UUID
	EnvironmentID uuid.UUID
	TenantID      uuid.UUID
	NodeID        uuid.UUID
	Generation    int64
	// CredentialDigest is the SHA-256 of the dedicated daemon credential.
	CredentialDigest []byte
	DeviceID         uuid.UUID
	State            AllocationState
	// CreateReceipt permits exactly one Create; it is spent once State
	// leaves allocated.
	CreateReceipt      uuid.UUID
	CreateDispatchedAt *time.Time
	// CreateSettled: a matching resource with completed bootstrap was
	// observed. AbsenceReceipt: the provider's explicit receipt that Create
	// settled without a resource. Never both.
	CreateSettled     bool
	AbsenceReceipt    bool
	BootstrapComplete bool
	ProviderID        string
	// ComputePhase is where the compute is in the suspension cycle;
	// ComputeGeneration, ComputeName and ComputeID name its current
	// incarnation (the target while restoring; ComputeName empty: the
	// Create's, see Compute).
	ComputePhase       ComputePhase
	ComputeGeneration  int64
	ComputeName        string
	ComputeID          string
	Suspension         Suspension
	Revision           int64
	CleanupRequestedAt *time.Time
	CleanupConfirmedAt *time.Time
	// DeviceRevokedAt is when terminal cleanup revoked the device (see
	// Termination); nil while the device may authenticate.
	DeviceRevokedAt *time.Time
	// ArchiveCancelTurnID is the running Turn whose cancellation the
	// archive that first revoked the device requested (ArchiveSession);
	// nil otherwise.
	ArchiveCancelTurnID *uuid.UUID
	// CreateAbandonedAt is when the lifecycle worker gave up the unknown
	// Create (AbandonCreate); nil otherwise.
	CreateAbandonedAt *time.Time
	// AbandonedAt is when an operator's abandon of the allocation's node
	// released it without cleanup (Owner.AbandonNode); nil otherwise.
	AbandonedAt *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ReleasedAt  *time.Time
	// Observation is what the lifecycle worker last observed of the running
	// compute (RecordObservation); the zero value before the first.
	Observation Observation
	// ForkID is the fork this allocation is a child of (its Create is
	// seeded from the fork's snapshot: forks.go); nil otherwise.
	ForkID *uuid.UUID
}

// Reference returns the allocation's exact provider Reference.
func (a Allocation) Reference() sandbox.Reference { return a.Address().Reference() }

// Address is what of a addresses a provider call.
func (a Allocation) Address() AllocationAddress {
	return AllocationAddress{ID: a.ID, EnvironmentID: a.EnvironmentID, TenantID: a.TenantID, NodeID: a.NodeID, Generation: a.Generation}
}

// Answers reports whether a is the allocation a provider call about ref
// on lane (a node, or DirectLane) may be sent for (AllocationAddress.Answers).
func (a Allocation) Answers(lane uuid.UUID, ref sandbox.Reference) bool {
	return a.Address().Answers(lane, ref)
}

// AllocationAddress is the part of an allocation that addresses a provider
// call: its Reference, its lane and its generation. Core's node proxy reads
// only this for each call (GetAllocationAddresses), not the whole row.
type AllocationAddress struct {
	ID, EnvironmentID, TenantID uuid.UUID
	NodeID                      uuid.UUID
	Generation                  int64
}

// Reference is the sandbox.Reference of the allocation.
func (a AllocationAddress) Reference() sandbox.Reference {
	return sandbox.Reference{
		TenantID:      a.TenantID.String(),
		EnvironmentID: a.EnvironmentID.String(),
		AllocationID:  a.ID.String(),
	}
}

// Answers reports whether a is the allocation a provider call about ref
// on lane (a node, or DirectLane) may be sent for: ref is exactly a's
// Reference, a is on lane, and a has a generation. Core's node proxy and
// its direct lane's provider both refuse a call otherwise, before sending
// anything.
func (a AllocationAddress) Answers(lane uuid.UUID, ref sandbox.Reference) bool {
	return a.NodeID == lane && a.Reference() == ref && a.Generation > 0
}

// CreationSettled reports whether the original Create can no longer
// produce a resource later: it was never claimed (so never sent), a
// matching resource was observed with completed bootstrap, or an explicit
// absence receipt settled it.
func (a Allocation) CreationSettled() bool {
	return a.CreateDispatchedAt == nil || a.CreateSettled || a.AbsenceReceipt
}

// CountUnreleasedAllocations counts the unreleased allocations by state
// (an index scan of the unreleased ones; released allocations are history
// and are not counted).
func (s *Reader) CountUnreleasedAllocations(ctx context.Context) (map[AllocationState]int64, error) {
	rows, err := s.q.CountUnreleasedAllocations(ctx)
	if err != nil {
		return nil, wrap("count unreleased allocations", err)
	}
	out := make(map[AllocationState]int64, len(rows))
	for _, r := range rows {
		out[AllocationState(r.State)] = r.Allocations
	}
	return out, nil
}

// GetAllocation returns an allocation by id; ErrNotFound when there is
// none.
func (s *Reader) GetAllocation(ctx context.Context, id uuid.UUID) (Allocation, error) {
	row, err := s.q.GetAllocation(ctx, id)
	if err != nil {
		return Allocation{}, wrap("get allocation", err)
	}
	return allocationFromRow(row), nil
}

// GetAllocationAddresses reads the addresses of the allocations of ids
// that exist (at most MaxObservationMark ids), in id order: one narrow
// read for a page of calls.
func (s *Reader) GetAllocationAddresses(ctx context.Context, ids []uuid.UUID) ([]AllocationAddress, error) {
	const op = "get allocation addresses"
	if len(ids) > MaxObservationMark {
		return nil, fmt.Errorf("%s: %w", op, errdefs.Invalid("ids", "must hold at most 64 ids"))
	}
	return fetchRows(op, func() ([]db.GetAllocationAddressesRow, error) { return s.q.GetAllocationAddresses(ctx, ids) },
		func(r db.GetAllocationAddressesRow) AllocationAddress {
			return AllocationAddress{ID: r.ID, EnvironmentID: r.EnvironmentID, TenantID: r.TenantID, NodeID: laneOf(r.NodeID), Generation: r.Generation}
		})
}

// CancelDrain is how long, from a Turn's cancel_requested_at, terminal
// cleanup waits for its Runtime to report the cancelled Turn's result: the
// gateway keeps a revoked connection open that long (its drain), and the
// lifecycle worker does not Kill the compute meanwhile (CancelDraining), so
// the Kill that follows terminal cleanup does not cut the result off and
// leave the Turn unconfirmed. A Runtime that does not answer in time is
// killed all the same.
const CancelDrain = 20 * time.Second

// CancelDraining reports whether allocation id's Session has a running
// Turn whose cancellation was requested less than CancelDrain ago by the
// database clock: its result may still arrive, so Kill waits.
func (s *Reader) CancelDraining(ctx context.Context, id uuid.UUID) (bool, error) {
	draining, err := s.q.AllocationCancelDraining(ctx, db.AllocationCancelDrainingParams{ID: id, DrainSeconds: int32(CancelDrain / time.Second)})
	if err != nil {
		return false, wrap("cancel draining", err)
	}
	return draining, nil
}

// Bounds of a sealed device credential (AES-256-GCM, see core/secrets).
const (
	sealNonceLen        = 12
	sealTagLen          = 16
	maxSealedCredential = 1024
)

// SealedCredential is an allocation's device credential as kept at rest.
type SealedCredential struct {
	Ciphertext []byte
	Nonce      []byte
}

// GetAllocationCredential returns the allocation's sealed device
// credential; ErrNotFound when there is no such allocation, and
// ErrFailedPrecondition when the allocation keeps none (it predates
// sealed credentials): such an allocation can never be created.
func (s *Reader) GetAllocationCredential(ctx context.Context, id uuid.UUID) (SealedCredential, error) {
	const op = "get allocation credential"
	row, err := s.q.GetAllocationCredential(ctx, id)
	if err != nil {
		return SealedCredential{}, wrap(op, err)
	}
	if row.CredentialCiphertext == nil || row.CredentialNonce == nil {
		return SealedCredential{}, fmt.Errorf("%s: no sealed credential kept: %w", op, errdefs.ErrFailedPrecondition)
	}
	return SealedCredential{Ciphertext: row.CredentialCiphertext, Nonce: row.CredentialNonce}, nil
}

// ClaimCreate spends the allocation's create receipt: a compare-and-swap
// from allocated to create_dispatched that succeeds only with the matching
// receipt and only once, so Create is sent at most once for an allocation,
// whatever retries, timeouts or restarts follow. The caller sends Create
// only after ClaimCreate returned nil; when the claim's own outcome is
// unknown (ErrObservationUnavailable) it re-reads the allocation and never
// claims again with hope. A wrong or spent receipt, or an allocation whose
// cleanup was requested first, is ErrFenced, and so is a Store whose owner
// epoch no longer holds the execution lease (ErrSuperseded, see
// Owner); ErrNotFound when there is no such allocation. While the provider
// is disabled it is ErrProviderDisabled and the receipt stays fresh: the
// allocation waits.
func (s *Owner) ClaimCreate(ctx context.Context, id, receipt uuid.UUID) (Allocation, error) {
	const op = "claim create"
	var out Allocation
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		// A pending allocation of a generation that is no longer current
		// is still created: it keeps its generation.
		if _, err := admitProvider(ctx, q); err != nil {
			return err
		}
		row, err := q.ClaimCreate(ctx, db.ClaimCreateParams{ID: id, CreateReceipt: receipt})
		out, err = swapped(ctx, q, id, row, err, "create receipt is not fresh")
		return err
	})
	if err != nil {
		return Allocation{}, wrap(op, err)
	}
	return out, nil
}

// swapped reads the answer of a compare-and-swap on allocation id: no row
// is ErrFenced (why names the condition that failed) when the allocation
// exists, ErrNotFound when it does not.
func swapped(ctx context.Context, q *db.Queries, id uuid.UUID, row db.Allocation, err error, why string) (Allocation, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := q.GetAllocation(ctx, id); err != nil {
			return Allocation{}, err
		}
		return Allocation{}, fmt.Errorf("%s: %w", why, errdefs.ErrFenced)
	}
	if err != nil {
		return Allocation{}, err
	}
	return allocationFromRow(row), nil
}

// CreateOutcomeKind is what an observation of a dispatched Create found.
type CreateOutcomeKind int

// The Create outcomes.
const (
	// CreateRunning: a resource matching the exact Reference was observed
	// (ProviderID names it). With BootstrapComplete this is settlement
	// evidence.
	CreateRunning CreateOutcomeKind = iota + 1
	// CreateUnknown: the outcome is unknown (timeout, lost response,
	// unreachable node). Never proof of failure or absence.
	CreateUnknown
	// CreateAbsent: the provider's explicit absence receipt: Create settled
	// and left no resource. An empty listing or ErrNotFound is not one.
	CreateAbsent
)

// CreateOutcome is an observation of a dispatched Create.
type CreateOutcome struct {
	Kind              CreateOutcomeKind
	ProviderID        string
	BootstrapComplete bool
}

// CreateAttempt identifies the one Create an allocation's create receipt
// permits: the allocation and that receipt. ClaimCreate spends the
// receipt, so the attempt is sent at most once, and every observation of
// it (the Create call's own outcome, later GetInfo) is recorded against
// the attempt (RecordCreateOutcome), never against a revision the
// allocation may have left since.
type CreateAttempt struct {
	AllocationID uuid.UUID
	Receipt      uuid.UUID
}

// CreateAttempt returns the allocation's Create attempt.
func (a Allocation) CreateAttempt() CreateAttempt {
	return CreateAttempt{AllocationID: a.ID, Receipt: a.CreateReceipt}
}

// RecordCreateOutcome records o, an observation of attempt's Create. The
// attempt, not the allocation's revision, fences the record: a Session
// deletion (RequestCleanup) moves the revision while Create is in flight,
// and then the deletion and the outcome both stand, because the outcome is
// the settlement evidence the cleanup needs before Release. The evidence
// only accumulates (a provider id is recorded once; completed bootstrap
// and an absence receipt stay) and an observation that contradicts it is
// refused, so observations of the same attempt cannot undo one another,
// whatever their order.
//
// Before cleanup it moves the state (create_dispatched or create_unknown
// to running, create_unknown or create_failed), and a running resource
// marks the placement active. Once cleanup was requested the state stays
// in cleanup and only the settlement evidence is recorded, so a late
// observation still settles creation; a resource observed after cleanup
// was confirmed takes the confirmation back (cleanup_unknown), since it
// may have appeared after the Kill that confirmed it, so Release waits for
// another confirmed cleanup.
//
// Refused, with nothing written: ErrFenced when attempt's receipt is not
// the allocation's (a foreign or stale attempt, such as the receipt of the
// Environment's previous allocation) and ErrSuperseded for an owner epoch
// that lost the lease; ErrFailedPrecondition when the observation
// contradicts the record: the receipt was never spent by ClaimCreate (so
// Create was never sent), the allocation is released, an absence after a
// resource was seen, another provider id, an unknown result after
// settlement (or, before cleanup, after a running resource); ErrNotFound
// when there is no such allocation; ErrInvalid for a malformed outcome.
func (s *Owner) RecordCreateOutcome(ctx context.Context, attempt CreateAttempt, o CreateOutcome) (Allocation, error) {
	const op = "record create outcome"
	if err := validateCreateOutcome(o); err != nil {
		return Allocation{}, fmt.Errorf("%s: %w", op, err)
	}
	return s.transition(ctx, op, attempt.AllocationID, nil, func(q *db.Queries, a *Allocation) error {
		if err := checkCreateAttempt(a, attempt); err != nil {
			return err
		}
		cleanup := a.State.inCleanup()
		switch o.Kind {
		case CreateRunning:
			return recordCreateRunning(ctx, q, a, o, cleanup)
		case CreateUnknown:
			return recordCreateUnknown(a, cleanup)
		case CreateAbsent:
			return recordCreateAbsent(a, cleanup)
		}
		return nil
	})
}

// validateCreateOutcome checks o's shape before anything is read: a running
// outcome carries a valid provider id, the others carry neither a provider
// id nor bootstrap (ErrInvalid).
func validateCreateOutcome(o CreateOutcome) error {
	switch o.Kind {
	case CreateRunning:
		if o.ProviderID == "" || len(o.ProviderID) > 256 || !utf8.ValidString(o.ProviderID) {
			return errdefs.Invalid("provider_id", "must be 1 to 256 bytes of UTF-8")
		}
	case CreateUnknown, CreateAbsent:
		if o.ProviderID != "" || o.BootstrapComplete {
			return errdefs.Invalid("outcome", "only a running outcome carries a provider id or bootstrap")
		}
	default:
		return errdefs.Invalid("outcome", "unknown kind")
	}
	return nil
}

// checkCreateAttempt refuses an outcome for a's locked row unless attempt
// is a's own Create attempt (ErrFenced), that Create was claimed and a is
// not released (ErrFailedPrecondition).
func checkCreateAttempt(a *Allocation, attempt CreateAttempt) error {
	switch {
	case a.CreateReceipt != attempt.Receipt:
		return fmt.Errorf("not the allocation's create attempt: %w", errdefs.ErrFenced)
	case a.CreateDispatchedAt == nil:
		return fmt.Errorf("create was never claimed: %w", errdefs.ErrFailedPrecondition)
	case a.State == AllocationReleased:
		return fmt.Errorf("allocation is released: %w", errdefs.ErrFailedPrecondition)
	}
	return nil
}

// recordCreateRunning records a running resource: its provider id once and
// bootstrap that only accumulates. Before cleanup the allocation runs and
// its placement turns active; after a confirmed cleanup the confirmation
// is taken back (cleanup_unknown), since the resource may have appeared
// after the Kill that confirmed it.
func recordCreateRunning(ctx context.Context, q *db.Queries, a *Allocation, o CreateOutcome, cleanup bool) error {
	if a.AbsenceReceipt {
		return fmt.Errorf("create already settled as absent: %w", errdefs.ErrFailedPrecondition)
	}
	if a.ProviderID != "" && a.ProviderID != o.ProviderID {
		return fmt.Errorf("another provider id is recorded: %w", errdefs.ErrFailedPrecondition)
	}
	a.ProviderID = o.ProviderID
	a.BootstrapComplete = a.BootstrapComplete || o.BootstrapComplete
	a.CreateSettled = a.BootstrapComplete
	switch {
	case !cleanup:
		a.State = AllocationRunning
		return q.ActivatePlacement(ctx, a.EnvironmentID)
	case a.State == AllocationCleanupConfirmed:
		a.State = AllocationCleanupUnknown
	}
	return nil
}

// recordCreateUnknown records a Create of unknown outcome, refused once
// creation settled or a running resource was seen; before cleanup the
// allocation becomes create_unknown.
func recordCreateUnknown(a *Allocation, cleanup bool) error {
	if a.CreateSettled || a.AbsenceReceipt || a.State == AllocationRunning {
		return fmt.Errorf("create already settled: %w", errdefs.ErrFailedPrecondition)
	}
	if !cleanup {
		a.State = AllocationCreateUnknown
	}
	return nil
}

// recordCreateAbsent records the absence receipt, refused once a resource
// was observed; before cleanup the allocation becomes create_failed.
func recordCreateAbsent(a *Allocation, cleanup bool) error {
	if a.CreateSettled || a.ProviderID != "" {
		return fmt.Errorf("a resource was observed: %w", errdefs.ErrFailedPrecondition)
	}
	a.AbsenceReceipt = true
	if !cleanup {
		a.State = AllocationCreateFailed
	}
	return nil
}

// RequestCleanup records the intent to clean up the allocation's owned
// compute and volumes. From allocated it also spends the create receipt,
// so a later ClaimCreate fails. Calling it again during cleanup changes
// nothing; ErrFailedPrecondition for a released allocation.
func (s *Owner) RequestCleanup(ctx context.Context, id uuid.UUID) (Allocation, error) {
	var out Allocation
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		var err error
		out, err = requestCleanup(ctx, q, id)
		return err
	})
	if err != nil {
		return Allocation{}, wrap("request cleanup", err)
	}
	return out, nil
}

// requestCleanup is RequestCleanup inside the caller's transaction.
func requestCleanup(ctx context.Context, q *db.Queries, id uuid.UUID) (Allocation, error) {
	row, err := q.LockAllocation(ctx, id)
	if err != nil {
		return Allocation{}, err
	}
	a := allocationFromRow(row)
	switch {
	case a.State == AllocationReleased:
		return Allocation{}, fmt.Errorf("allocation is released: %w", errdefs.ErrFailedPrecondition)
	case a.State.inCleanup():
		return a, nil
	}
	a.State = AllocationCleanupRequested
	return update(ctx, q, a, a.Revision)
}

// RecordCleanup records the outcome of a cleanup attempt at revision
// revision (ErrFenced when the allocation moved on): confirmed means the
// provider confirmed every owned resource absent by exact ownership, not
// an empty listing or ErrNotFound (or, for an allocation whose Create was
// never claimed, that no Create was ever sent, so nothing of its
// Reference exists: core/lifecycle sends no Kill then); otherwise the
// cleanup is unknown, also
// after an earlier confirmation (a late resource appeared), which takes
// the confirmation back. ErrFailedPrecondition unless cleanup was
// requested and the allocation is not released.
func (s *Owner) RecordCleanup(ctx context.Context, id uuid.UUID, revision int64, confirmed bool) (Allocation, error) {
	return s.transition(ctx, "record cleanup", id, &revision, func(q *db.Queries, a *Allocation) error {
		if !a.State.inCleanup() {
			return fmt.Errorf("cleanup was not requested: %w", errdefs.ErrFailedPrecondition)
		}
		if confirmed {
			a.State = AllocationCleanupConfirmed
			// Kill removed the Reference's compute and retained resources,
			// its past incarnations and snapshots with them.
			if _, err := q.MarkLeftoversOfAllocationDeleted(ctx, a.ID); err != nil {
				return err
			}
		} else {
			a.State = AllocationCleanupUnknown
		}
		return nil
	})
}

// Release ends the allocation's ownership, in one transaction. It is
// allowed only when cleanup was confirmed and creation settled (see
// CreationSettled); otherwise it is ErrFailedPrecondition and changes
// nothing, so an unknown creation keeps its cleanup ownership and its
// reservation. Releasing a released allocation returns it unchanged.
//
// The placement (the node's capacity) is released with it, unless the
// Session is active and its Environment still pending: then the
// Environment keeps its reservation on the same node and, having no
// allocation, waits for the pending scan (AllocatePending). The Session
// row is locked first, as RequestSessionDeletion locks it, so a deletion
// either sees the released allocation (and releases the placement itself)
// or is seen here.
func (s *Owner) Release(ctx context.Context, id uuid.UUID) (Allocation, error) {
	const op = "release"
	var out Allocation
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		sess, env, err := lockSessionOf(ctx, q, id)
		if err != nil {
			return err
		}
		row, err := q.LockAllocation(ctx, id)
		if err != nil {
			return err
		}
		a := allocationFromRow(row)
		switch {
		case a.State == AllocationReleased:
			out = a
			return nil
		case a.State != AllocationCleanupConfirmed:
			return fmt.Errorf("cleanup is not confirmed: %w", errdefs.ErrFailedPrecondition)
		case !a.CreationSettled():
			return fmt.Errorf("creation is not settled: %w", errdefs.ErrFailedPrecondition)
		}
		a.State = AllocationReleased
		if out, err = update(ctx, q, a, a.Revision); err != nil {
			return err
		}
		// Re-read under the locks: a failure recorded since the first read
		// counts.
		if env, err = q.GetEnvironment(ctx, a.EnvironmentID); err != nil {
			return err
		}
		if SessionState(sess.State) == SessionActive && EnvironmentState(env.State) == EnvironmentPending {
			return q.ReservePlacement(ctx, a.EnvironmentID)
		}
		return q.ReleasePlacement(ctx, a.EnvironmentID)
	})
	if err != nil {
		return Allocation{}, wrap(op, err)
	}
	return out, nil
}

// lockSessionOf reads the Environment of allocation id and locks its
// Session row, the first lock of a transition that may end the allocation
// (Release, ResolveCreateFailure): the order RequestSessionDeletion and
// terminal cleanup take too, so neither sees half of the other.
func lockSessionOf(ctx context.Context, q *db.Queries, id uuid.UUID) (db.Session, db.Environment, error) {
	peek, err := q.GetAllocation(ctx, id)
	if err != nil {
		return db.Session{}, db.Environment{}, err
	}
	env, err := q.GetEnvironment(ctx, peek.EnvironmentID)
	if err != nil {
		return db.Session{}, db.Environment{}, err
	}
	sess, err := q.LockSession(ctx, env.SessionID)
	return sess, env, err
}

// MaxCreateAttempts bounds the failed Creates of one Environment: after
// that many allocations of it ended in an explicit absence receipt or were
// abandoned (AbandonCreate), ResolveCreateFailure or AbandonCreate records
// the Environment failed (failure code FailureCreateFailed) instead of
// leaving it pending for another allocation. An unknown outcome counts
// only once abandoned, never while it is merely unknown.
const MaxCreateAttempts = 3

// FailureCreateFailed is the failure code of an Environment whose Create
// settled without a resource MaxCreateAttempts times.
const FailureCreateFailed = "create_failed"

// ResolveCreateFailure moves a create_failed allocation (Create settled by
// an explicit absence receipt) to cleanup_requested at revision revision
// (ErrFenced when it moved on), so the owned cleanup runs (Kill removes
// any partial resources) before the allocation is released. When the
// Environment has had MaxCreateAttempts such failures, this one included,
// the same transaction is the Environment's terminal cleanup with cause
// TerminalFailed and FailureCreateFailed (see Termination: the device is
// revoked, queued Turns end environment_failed, a running one is asked to
// cancel); otherwise the Environment stays pending and, once the
// allocation is released, gets a new allocation (new credential, new
// receipt) from the pending scan on the same node. ErrFailedPrecondition
// unless the allocation is create_failed.
func (s *Owner) ResolveCreateFailure(ctx context.Context, id uuid.UUID, revision int64) (Allocation, error) {
	const op = "resolve create failure"
	var out Allocation
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		env, err := lockForAttemptEnd(ctx, q, id)
		if err != nil {
			return err
		}
		row, err := q.LockAllocation(ctx, id)
		if err != nil {
			return err
		}
		a := allocationFromRow(row)
		switch {
		case a.Revision != revision:
			return fmt.Errorf("allocation revision moved: %w", errdefs.ErrFenced)
		case a.State != AllocationCreateFailed:
			return fmt.Errorf("allocation is not create_failed: %w", errdefs.ErrFailedPrecondition)
		}
		if failed, term, err := failAfterMaxAttempts(ctx, q, env.ID); failed || err != nil {
			out = term
			return err
		}
		a.State = AllocationCleanupRequested
		out, err = update(ctx, q, a, a.Revision)
		return err
	})
	if err != nil {
		return Allocation{}, wrap(op, err)
	}
	return out, nil
}

// AbandonCreate gives up the unknown Create of allocation id at revision
// revision once it was dispatched at least after ago by the database
// clock: a Create whose answer was lost (the node agent or the engine died
// mid-call, the connection was cut) and that no observation settled. The
// allocation moves from create_unknown or create_dispatched to
// cleanup_requested with its device revoked, in one transaction, and the
// abandonment counts as a failed attempt (MaxCreateAttempts). Abandoning
// proves nothing about the Create: the cleanup that follows must still
// settle it (for Docker, Kill removes what the attempt made and claims its
// names with a tombstone, whose absence receipt settles it) before
// Release, which keeps the reservation of a still pending Environment for
// its next allocation (AllocatePending). When the Environment has had
// MaxCreateAttempts attempts end without compute, this one included, the
// same transaction is the Environment's terminal cleanup with cause
// TerminalFailed and FailureCreateFailed, as in ResolveCreateFailure.
//
// It returns the allocation and whether it abandoned it: false, with the
// allocation as it is, when the revision moved, the state is another or
// the Create is younger than after. ErrInvalid for an after under a
// second.
func (s *Owner) AbandonCreate(ctx context.Context, id uuid.UUID, revision int64, after time.Duration) (Allocation, bool, error) {
	const op = "abandon create"
	if after < time.Second || after > 24*time.Hour {
		return Allocation{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("after", "must be 1 s to 24 h"))
	}
	var out Allocation
	abandoned := false
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		env, err := lockForAttemptEnd(ctx, q, id)
		if err != nil {
			return err
		}
		row, err := q.AbandonCreate(ctx, db.AbandonCreateParams{
			ID: id, Revision: revision, AfterSeconds: int32(after / time.Second),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err := q.GetAllocation(ctx, id)
			out = allocationFromRow(cur)
			return err
		}
		if err != nil {
			return err
		}
		abandoned, out = true, allocationFromRow(row)
		if failed, term, err := failAfterMaxAttempts(ctx, q, env.ID); failed || err != nil {
			out = term
			return err
		}
		return notifyNodeWork(ctx, q, out.NodeID)
	})
	if err != nil {
		return Allocation{}, false, wrap(op, err)
	}
	return out, abandoned, nil
}

// lockForAttemptEnd takes the locks of a transition that ends a Create
// attempt (ResolveCreateFailure, AbandonCreate) and may end the
// Environment: its Session, then its Environment (the lock order of
// terminal cleanup); the caller locks the allocation last.
func lockForAttemptEnd(ctx context.Context, q *db.Queries, id uuid.UUID) (db.Environment, error) {
	_, env, err := lockSessionOf(ctx, q, id)
	if err != nil {
		return db.Environment{}, err
	}
	return q.LockEnvironment(ctx, env.ID)
}

// failAfterMaxAttempts records the Environment failed (terminal cleanup
// with FailureCreateFailed) when MaxCreateAttempts of its Create attempts
// ended without compute, and says whether it did, with the allocation as
// terminal cleanup left it.
func failAfterMaxAttempts(ctx context.Context, q *db.Queries, environmentID uuid.UUID) (bool, Allocation, error) {
	n, err := q.CountCreateFailures(ctx, environmentID)
	if err != nil || n < MaxCreateAttempts {
		return false, Allocation{}, err
	}
	term, err := terminate(ctx, q, environmentID, TerminalFailed, FailureCreateFailed)
	return true, term.Cleanup, err
}

// PendingAllocationParams is the input of AllocatePending. Every id, the
// credential digest, its sealed form and the create receipt are the
// caller's, fresh for this allocation.
type PendingAllocationParams struct {
	EnvironmentID uuid.UUID
	// NodeID is the lane of the worker asking (a node, or DirectLane): it
	// must be the lane of the
	// Environment's placement (Core never chooses another node).
	NodeID       uuid.UUID
	AllocationID uuid.UUID
	DeviceID     uuid.UUID
	// CredentialDigest, CredentialCiphertext and CredentialNonce are a new
	// device credential's digest and sealed form (see CreateSessionParams).
	CredentialDigest     []byte
	CredentialCiphertext []byte
	CredentialNonce      []byte
	CreateReceipt        uuid.UUID
}

// validate accepts every NodeID: uuid.Nil is the direct lane
// (DirectLane), and AllocatePending refuses a placement on another lane.
func (p PendingAllocationParams) validate() error {
	return validateNewAllocation(p.EnvironmentID, p.AllocationID, p.DeviceID, p.CreateReceipt,
		p.CredentialDigest, p.CredentialNonce, p.CredentialCiphertext)
}

// validateNewAllocation checks what every new allocation carries, the same
// way for CreateSession and AllocatePending: non-nil ids, an allocation id
// that is not the Environment's, a SHA-256 credential digest and a sealed
// credential.
func validateNewAllocation(environment, allocation, device, receipt uuid.UUID, digest, nonce, ciphertext []byte) error {
	for _, f := range []struct {
		name string
		id   uuid.UUID
	}{
		{"environment_id", environment},
		{"allocation_id", allocation},
		{"device_id", device},
		{"create_receipt", receipt},
	} {
		if f.id == uuid.Nil {
			return errdefs.Invalid(f.name, "must not be the nil UUID")
		}
	}
	switch {
	case allocation == environment:
		return errdefs.Invalid("allocation_id", "must differ from the environment id")
	case len(digest) != hashLen:
		return errdefs.Invalid("credential_digest", "must be a SHA-256")
	case len(nonce) != sealNonceLen:
		return errdefs.Invalid("credential_nonce", "must be a sealing nonce")
	case len(ciphertext) <= sealTagLen || len(ciphertext) > maxSealedCredential:
		return errdefs.Invalid("credential_ciphertext", "must be a sealed credential")
	}
	return nil
}

// insertAllocation inserts a new allocation of env on pl's node and
// generation with the caller's ids, credential digest, sealed credential
// and create receipt (as validateNewAllocation checked them): the one
// insert of CreateSession and AllocatePending.
func insertAllocation(ctx context.Context, q *db.Queries, env db.Environment, pl db.Placement,
	allocation, device, receipt uuid.UUID, digest, nonce, ciphertext []byte,
) (db.Allocation, error) {
	return q.InsertAllocation(ctx, db.InsertAllocationParams{
		ID:               allocation,
		EnvironmentID:    env.ID,
		TenantID:         env.TenantID,
		NodeID:           pl.NodeID,
		Generation:       pl.Generation,
		CredentialDigest: digest,
		DeviceID:         device,
		CreateReceipt:    receipt,

		CredentialCiphertext: ciphertext,
		CredentialNonce:      nonce,
	})
}

// AllocatePending commits a new allocation (fresh Reference, device,
// credential digest and sealed credential, fresh create receipt) for a
// pending Environment of an active Session that has an unreleased
// placement on node p.NodeID and no unreleased allocation: the pending
// scan's path for an Environment whose previous allocation was released
// (a settled Create failure) or never committed. It takes the Session lock
// (the Session row), then the placement row, under the owner fence. The
// allocation gets the placement's node and generation.
//
// An Environment that has an unreleased allocation is ErrExists: an
// existing allocation never re-enters this path, whatever its state. A
// Session whose deletion was requested, an Environment that is not pending,
// a released placement or one on another node is ErrFailedPrecondition;
// ErrNotFound when there is no such Environment. Nothing is written then.
func (s *Owner) AllocatePending(ctx context.Context, p PendingAllocationParams) (Allocation, error) {
	const op = "allocate pending"
	if err := p.validate(); err != nil {
		return Allocation{}, fmt.Errorf("%s: %w", op, err)
	}
	var out Allocation
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		env, err := q.GetEnvironment(ctx, p.EnvironmentID)
		if err != nil {
			return err
		}
		sess, err := q.LockSession(ctx, env.SessionID)
		if err != nil {
			return err
		}
		if env, err = q.GetEnvironment(ctx, p.EnvironmentID); err != nil {
			return err
		}
		pl, err := q.LockPlacementRow(ctx, env.ID)
		if err != nil {
			return err
		}
		switch {
		case SessionState(sess.State) != SessionActive:
			return fmt.Errorf("session deletion was requested: %w", errdefs.ErrFailedPrecondition)
		case EnvironmentState(env.State) != EnvironmentPending:
			return fmt.Errorf("environment is not pending: %w", errdefs.ErrFailedPrecondition)
		case PlacementState(pl.State) == PlacementReleased:
			return fmt.Errorf("placement is released: %w", errdefs.ErrFailedPrecondition)
		case laneOf(pl.NodeID) != p.NodeID:
			return fmt.Errorf("environment is placed on another lane: %w", errdefs.ErrFailedPrecondition)
		}
		if _, err := q.GetUnreleasedAllocationForEnvironment(ctx, env.ID); err == nil {
			return fmt.Errorf("environment has an allocation: %w", errdefs.ErrExists)
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		row, err := insertAllocation(ctx, q, env, pl, p.AllocationID, p.DeviceID, p.CreateReceipt,
			p.CredentialDigest, p.CredentialNonce, p.CredentialCiphertext)
		if err != nil {
			return err
		}
		out = allocationFromRow(row)
		return nil
	})
	if err != nil {
		return Allocation{}, wrap(op, err)
	}
	return out, nil
}

// transition locks the allocation, checks the caller's revision (when
// given), lets decide change it and writes the result in the same
// transaction. When decide leaves it unchanged, nothing is written.
func (s *Owner) transition(ctx context.Context, op string, id uuid.UUID, revision *int64,
	decide func(q *db.Queries, a *Allocation) error,
) (Allocation, error) {
	var out Allocation
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		row, err := q.LockAllocation(ctx, id)
		if err != nil {
			return err
		}
		cur := allocationFromRow(row)
		if revision != nil && cur.Revision != *revision {
			return fmt.Errorf("allocation revision moved: %w", errdefs.ErrFenced)
		}
		next := cur
		next.CredentialDigest = nil // not compared, never written here
		if err := decide(q, &next); err != nil {
			return err
		}
		if next.State == cur.State && next.CreateSettled == cur.CreateSettled &&
			next.AbsenceReceipt == cur.AbsenceReceipt && next.BootstrapComplete == cur.BootstrapComplete &&
			next.ProviderID == cur.ProviderID {
			out = cur
			return nil
		}
		out, err = update(ctx, q, next, cur.Revision)
		return err
	})
	if err != nil {
		return Allocation{}, wrap(op, err)
	}
	return out, nil
}

// update writes a's mutable lifecycle fields at revision revision.
func update(ctx context.Context, q *db.Queries, a Allocation, revision int64) (Allocation, error) {
	row, err := q.UpdateAllocation(ctx, db.UpdateAllocationParams{
		ID:                a.ID,
		Revision:          revision,
		State:             string(a.State),
		CreateSettled:     a.CreateSettled,
		AbsenceReceipt:    a.AbsenceReceipt,
		BootstrapComplete: a.BootstrapComplete,
		ProviderID:        pgtype.Text{String: a.ProviderID, Valid: a.ProviderID != ""},
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Allocation{}, fmt.Errorf("allocation revision moved: %w", errdefs.ErrFenced)
	}
	if err != nil {
		return Allocation{}, err
	}
	return allocationFromRow(row), nil
}

// ListAllocationWorkForNode returns up to limit (1 to NodePageSize)
// allocations of node nodeID the allocation scan acts on (creation
// dispatched, unknown or failed; cleanup requested, unknown or confirmed)
// with ids after after (uuid.Nil for the start), in id order. Allocated
// and running ones are other scans' (pending, observation, suspension):
// an idle node's page is an empty range of their own index. The node
// filter applies before the limit, so another node's rows never shorten a
// page. An empty page means the end: the caller's per-node cursor wraps to
// uuid.Nil. nodeID DirectLane (uuid.Nil) pages the direct lane's.
func (s *Reader) ListAllocationWorkForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]Allocation, error) {
	const op = "list allocation work for node"
	n, err := nodePageParam(op, limit)
	if err != nil {
		return nil, err
	}
	return fetchRows(op, func() ([]db.Allocation, error) {
		if nodeID == DirectLane {
			return s.q.ListAllocationWorkForDirect(ctx, db.ListAllocationWorkForDirectParams{After: after, PageSize: n})
		}
		return s.q.ListAllocationWorkForNode(ctx, db.ListAllocationWorkForNodeParams{NodeID: nodeID, After: after, PageSize: n})
	}, allocationFromRow)
}

// NodeWork says which of a lane's lifecycle scans have a row anywhere
// (ProbeNodeWork): a false flag means that scan's first page is empty.
type NodeWork struct {
	Pending              bool // ListPendingForNode
	AllocationWork       bool // ListAllocationWorkForNode
	SuspensionWork       bool // ListSuspensionWorkForNode
	SuspensionCandidates bool // ListSuspensionCandidatesForNode
	Leftovers            bool // ListAllocationsOwingLeftovers
	Forks                bool // ListForkWorkForNode
	Seeds                bool // ListSeedWorkForNode
}

// AllNodeWork is a NodeWork with every flag set: every scan reads its page.
var AllNodeWork = NodeWork{Pending: true, AllocationWork: true, SuspensionWork: true, SuspensionCandidates: true, Leftovers: true, Forks: true, Seeds: true}

// ProbeNodeWork reads, in one statement, which of node nodeID's lifecycle
// scans would find a row from the start: each flag is its scan's predicate
// without the cursor, by the database clock of the read. An idle node's
// pass then reads its probe and its observation page instead of a page per
// scan. The direct lane (nodeID DirectLane) is not probed: it is one lane,
// so its idle pass is not what grows with an installation, and every flag
// is set (AllNodeWork).
func (s *Reader) ProbeNodeWork(ctx context.Context, nodeID uuid.UUID) (NodeWork, error) {
	if nodeID == DirectLane {
		return AllNodeWork, nil
	}
	r, err := s.q.ProbeNodeWork(ctx, nodeID)
	if err != nil {
		return NodeWork{}, wrap("probe node work", err)
	}
	return NodeWork(r), nil
}

// Pending is an Environment placed on a node whose compute has not been
// asked for yet.
type Pending struct {
	EnvironmentID uuid.UUID
	SessionID     uuid.UUID
	TenantID      uuid.UUID
	SessionState  SessionState
	Generation    int64
	// AllocationID is the allocation whose create receipt is still fresh,
	// uuid.Nil when the Environment has no unreleased allocation.
	AllocationID uuid.UUID
}

// ListPendingForNode returns up to limit (1 to NodePageSize) pending
// Environments with environment ids after after whose unreleased placement
// is on node nodeID and which have no unreleased allocation (see
// AllocatePending) or one still in allocated (Create not claimed), in
// environment id order. A failed Environment is never listed. Like
// ListAllocationWorkForNode it filters by node before the limit, and an empty
// page means the end. nodeID DirectLane (uuid.Nil) pages the direct
// lane's pending Environments.
func (s *Reader) ListPendingForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]Pending, error) {
	const op = "list pending for node"
	n, err := nodePageParam(op, limit)
	if err != nil {
		return nil, err
	}
	return fetchRows(op, func() ([]db.ListPendingForNodeRow, error) {
		if nodeID == DirectLane {
			rows, err := s.q.ListPendingForDirect(ctx, db.ListPendingForDirectParams{After: after, PageSize: n})
			out := make([]db.ListPendingForNodeRow, len(rows))
			for i, r := range rows {
				out[i] = db.ListPendingForNodeRow(r)
			}
			return out, err
		}
		return s.q.ListPendingForNode(ctx, db.ListPendingForNodeParams{NodeID: nodeID, After: after, PageSize: n})
	}, func(r db.ListPendingForNodeRow) Pending {
		p := Pending{
			EnvironmentID: r.EnvironmentID, SessionID: r.SessionID, TenantID: r.TenantID,
			SessionState: SessionState(r.SessionState), Generation: r.Generation,
		}
		if r.AllocationID != nil {
			p.AllocationID = *r.AllocationID
		}
		return p
	})
}

func allocationFromRow(r db.Allocation) Allocation {
	return Allocation{
		ID:                 r.ID,
		EnvironmentID:      r.EnvironmentID,
		TenantID:           r.TenantID,
		NodeID:             laneOf(r.NodeID),
		Generation:         r.Generation,
		CredentialDigest:   r.CredentialDigest,
		DeviceID:           r.DeviceID,
		State:              AllocationState(r.State),
		CreateReceipt:      r.CreateReceipt,
		CreateDispatchedAt: r.CreateDispatchedAt,
		CreateSettled:      r.CreateSettled,
		AbsenceReceipt:     r.AbsenceReceipt,
		BootstrapComplete:  r.BootstrapComplete,
		ProviderID:         r.ProviderID.String,
		ComputePhase:       ComputePhase(r.ComputePhase),
		ComputeGeneration:  r.ComputeGeneration,
		ComputeName:        r.ComputeName.String,
		ComputeID:          r.ComputeID.String,
		Suspension: Suspension{
			Operation: r.SuspendOperation, ArmedAt: r.QuiesceArmedAt, AckedAt: r.QuiesceAckedAt,
			CaptureSentAt: r.CaptureDispatchedAt,
			Snapshot:      sandbox.SnapshotIdentity{ID: r.SnapshotID.String, Provenance: r.SnapshotProvenance.String},
			SuspendedAt:   r.SuspendedAt, RetentionUntil: r.RetentionDeadline,
			RestoreOperation: r.RestoreOperation, RestoreSentAt: r.RestoreDispatchedAt,
			WakeRequestedAt: r.WakeRequestedAt, RequestedAt: r.SuspendRequestedAt, RestoredAt: r.RestoredAt,
		},
		Revision:            r.Revision,
		CleanupRequestedAt:  r.CleanupRequestedAt,
		CleanupConfirmedAt:  r.CleanupConfirmedAt,
		DeviceRevokedAt:     r.DeviceRevokedAt,
		ArchiveCancelTurnID: r.ArchiveCancelTurnID,
		CreatedAt:           r.CreatedAt,
		UpdatedAt:           r.UpdatedAt,
		ReleasedAt:          r.ReleasedAt,
		CreateAbandonedAt:   r.CreateAbandonedAt,
		AbandonedAt:         r.AbandonedAt,
		Observation:         observationFromRow(r),
		ForkID:              r.ForkID,
	}
}

// SessionAllocation is an allocation with the Session its Environment
// serves, and that Session's project and tenant.
type SessionAllocation struct {
	Allocation
	SessionID uuid.UUID
	ProjectID uuid.UUID
	TenantID  uuid.UUID
}

// GetSessionAllocation returns allocation id with its Session;
// ErrNotFound when there is no such allocation.
func (s *Reader) GetSessionAllocation(ctx context.Context, id uuid.UUID) (SessionAllocation, error) {
	row, err := s.q.GetAllocationWithSession(ctx, id)
	if err != nil {
		return SessionAllocation{}, wrap("get session allocation", err)
	}
	return SessionAllocation{Allocation: allocationFromRow(row.Allocation), SessionID: row.SessionID,
		ProjectID: row.ProjectID, TenantID: row.TenantID}, nil
}

// ListAllocationsByAge returns up to limit (1 to MaxPageSize+1)
// allocations, with their Sessions, after cursor after (the zero cursor
// for the start) in creation order (ties by id); released ones only with
// includeReleased.
func (s *Reader) ListAllocationsByAge(ctx context.Context, limit int, after AgeCursor, includeReleased bool) ([]SessionAllocation, error) {
	return s.listAllocations(ctx, nil, limit, after, includeReleased)
}

// ListProjectAllocationsByAge is ListAllocationsByAge of the allocations
// of projectID's Sessions only.
func (s *Reader) ListProjectAllocationsByAge(ctx context.Context, projectID uuid.UUID, limit int, after AgeCursor, includeReleased bool) ([]SessionAllocation, error) {
	return s.listAllocations(ctx, &projectID, limit, after, includeReleased)
}

// listAllocations pages allocations, of one project's Sessions when
// projectID is set.
func (s *Reader) listAllocations(ctx context.Context, projectID *uuid.UUID, limit int, after AgeCursor, includeReleased bool) ([]SessionAllocation, error) {
	return listPage("list allocations by age", limit, func(n int32) ([]db.ListAllocationsByAgeRow, error) {
		return s.q.ListAllocationsByAge(ctx, db.ListAllocationsByAgeParams{
			AfterCreatedAt: after.CreatedAt, AfterID: after.ID,
			IncludeReleased: includeReleased, ProjectID: projectID, PageSize: n,
		})
	}, func(r db.ListAllocationsByAgeRow) SessionAllocation {
		return SessionAllocation{Allocation: allocationFromRow(r.Allocation), SessionID: r.SessionID,
			ProjectID: r.ProjectID, TenantID: r.TenantID}
	})
}
