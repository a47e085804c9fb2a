package suspension

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/store"
	"berth.dev/sandbox"
)

// Store is the suspension cycle's writes: the owner-bound store
// (*store.Owner), because every one is fenced by the owner epoch. No other
// package calls them (writers_test.go).
type Store interface {
	RequestSuspend(ctx context.Context, sessionID, requestID uuid.UUID) (store.SessionBundle, error)
	RequestResume(ctx context.Context, sessionID, requestID uuid.UUID) (store.SessionBundle, error)
	ArmSuspension(ctx context.Context, id uuid.UUID, revision int64, op uuid.UUID) (store.Allocation, error)
	RecordQuiesceAck(ctx context.Context, id, op uuid.UUID) (store.Allocation, error)
	AbortQuiesce(ctx context.Context, id, op uuid.UUID) (store.Allocation, error)
	ClaimCapture(ctx context.Context, id, op uuid.UUID) (store.Allocation, error)
	RecordSuspended(ctx context.Context, id, op uuid.UUID, snap sandbox.SnapshotIdentity) (store.Allocation, error)
	RollBackCapture(ctx context.Context, id, op uuid.UUID, computeID string, leftover *sandbox.SnapshotIdentity) (store.Allocation, error)
	ArmRestore(ctx context.Context, id uuid.UUID, revision int64, op uuid.UUID, target sandbox.Compute) (store.Allocation, error)
	ClaimRestore(ctx context.Context, id, op uuid.UUID) (store.Allocation, error)
	RecordRestored(ctx context.Context, id, op uuid.UUID, computeID string) (store.Allocation, error)
	AbandonRestore(ctx context.Context, id, op uuid.UUID, target sandbox.Compute) (store.Allocation, error)
	AbandonRestoreOnReceipt(ctx context.Context, id, op uuid.UUID) (store.Allocation, error)
	ExpireRetention(ctx context.Context, id uuid.UUID) (store.Termination, error)
	MarkLeftoverDeleted(ctx context.Context, id int64) error
}

// Writes lists the store methods this package alone calls: every write of
// compute-phase state, suspension and restore intents and receipts, an
// admin's suspend-now and resume-now, and owed leftovers. The one-writer
// test (writers_test.go) fails when another package of the core module
// calls one.
var Writes = []string{
	"RequestSuspend", "RequestResume", "ArmSuspension", "RecordQuiesceAck", "AbortQuiesce",
	"ClaimCapture", "RecordSuspended", "RollBackCapture", "ArmRestore", "ClaimRestore",
	"RecordRestored", "AbandonRestore", "AbandonRestoreOnReceipt", "ExpireRetention", "MarkLeftoverDeleted",
}

// Service records the suspension cycle: what the Runtime gateway hears
// from a Runtime, what a node's lifecycle worker learns from its provider,
// and an admin's requests. It holds no state of its own; every write is
// one store transaction.
type Service struct {
	store Store
	// bus hears of every committed compute-phase transition (doc.go).
	bus *events.Bus
}

// New returns the Service writing to st. bus is told the Environment of
// every compute-phase transition once it committed (events.Phase: the
// Runtime gateway's connection of the Session reads the new phase at
// once) and what a retention expiry's terminal cleanup changed.
func New(st Store, bus *events.Bus) *Service {
	return &Service{store: st, bus: bus}
}

// announce publishes the compute-phase change of Environment env.
func (s *Service) announce(env uuid.UUID) {
	s.bus.Publish(events.Event{Kind: events.Phase, ID: env})
}

// announced announces a's transition when err is nil, and returns a and
// err as they are.
func (s *Service) announced(a store.Allocation, err error) (store.Allocation, error) {
	if err == nil {
		s.announce(a.EnvironmentID)
	}
	return a, err
}

// SuspendNow records an admin's suspend-now of a Session under requestID
// (store.RequestSuspend: idempotent by requestID; the node's worker arms
// it at once).
func (s *Service) SuspendNow(ctx context.Context, sessionID, requestID uuid.UUID) (store.SessionBundle, error) {
	return s.store.RequestSuspend(ctx, sessionID, requestID)
}

// ResumeNow records an admin's resume-now of a Session under requestID
// (store.RequestResume), as a submitted Turn would wake it.
func (s *Service) ResumeNow(ctx context.Context, sessionID, requestID uuid.UUID) (store.SessionBundle, error) {
	return s.store.RequestResume(ctx, sessionID, requestID)
}

// Arm records the quiesce intent of operation op for idle allocation a
// (store.ArmSuspension: PhaseQuiescing); store.ErrNoRoom without a
// retained slot, ErrFenced when a moved or is no longer idle.
func (s *Service) Arm(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error) {
	return s.announced(s.store.ArmSuspension(ctx, a.ID, a.Revision, op))
}

// QuiesceAcknowledged records the Runtime's acknowledgement of suspension
// op of allocation id (the compute stays quiescing: nothing is
// announced). ErrFenced when the suspension ended meanwhile.
func (s *Service) QuiesceAcknowledged(ctx context.Context, id, op uuid.UUID) error {
	_, err := s.store.RecordQuiesceAck(ctx, id, op)
	return err
}

// QuiesceRejected aborts suspension op of allocation id, which its
// Runtime refused (PhaseRunning). ErrFenced when it already ended.
func (s *Service) QuiesceRejected(ctx context.Context, id, op uuid.UUID) error {
	_, err := s.announced(s.store.AbortQuiesce(ctx, id, op))
	return err
}

// Abort aborts suspension op of quiescing allocation a before any capture:
// work arrived, or its Runtime did not acknowledge in time (PhaseRunning).
func (s *Service) Abort(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error) {
	return s.announced(s.store.AbortQuiesce(ctx, a.ID, op))
}

// BeginCapture consumes the capture receipt of acknowledged suspension op
// of allocation a (store.ClaimCapture: PhaseSuspending); only then may
// Suspend be sent. The claim is not announced: the quiesced Runtime's
// connection outlives it and ends on the capture's record. A refusal is:
// it may have aborted the suspension because work arrived, and the
// gateway then reopens admission.
func (s *Service) BeginCapture(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error) {
	claimed, err := s.store.ClaimCapture(ctx, a.ID, op)
	if err != nil {
		s.announce(a.EnvironmentID)
	}
	return claimed, err
}

// Captured records capture op of allocation a complete with its source
// gone (PhaseSuspended: the node's active slot is freed).
func (s *Service) Captured(ctx context.Context, a store.Allocation, op uuid.UUID, snap sandbox.SnapshotIdentity) (store.Allocation, error) {
	return s.announced(s.store.RecordSuspended(ctx, a.ID, op, snap))
}

// RolledBack records capture op of allocation a ended without a
// suspension: its source, native id computeID ("" to keep the recorded
// one), runs on, and leftover, when not nil, is owed to cleanup
// (PhaseRunning).
func (s *Service) RolledBack(ctx context.Context, a store.Allocation, op uuid.UUID, computeID string, leftover *sandbox.SnapshotIdentity) (store.Allocation, error) {
	return s.announced(s.store.RollBackCapture(ctx, a.ID, op, computeID, leftover))
}

// PrepareRestore records the restore intent of operation op into incarnation
// target for suspended allocation a (store.ArmRestore: PhaseRestoring);
// store.ErrNoRoom, store.ErrProviderDisabled and store.ErrTargetOwed mean
// the work waits.
func (s *Service) PrepareRestore(ctx context.Context, a store.Allocation, op uuid.UUID, target sandbox.Compute) (store.Allocation, error) {
	return s.announced(s.store.ArmRestore(ctx, a.ID, a.Revision, op, target))
}

// BeginRestore consumes the restore receipt of operation op of allocation
// a; only then may Resume be sent. store.ErrProviderDisabled keeps the
// receipt fresh.
func (s *Service) BeginRestore(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error) {
	return s.store.ClaimRestore(ctx, a.ID, op)
}

// Restored records restore op of allocation a confirmed running as native
// id computeID (PhaseRunning: the gateway admits its Runtime from then
// on). ErrFenced when deletion, revocation or retention expiry came first.
func (s *Service) Restored(ctx context.Context, a store.Allocation, op uuid.UUID, computeID string) (store.Allocation, error) {
	return s.announced(s.store.RecordRestored(ctx, a.ID, op, computeID))
}

// RestoreAbandoned gives up unknown restore op of allocation a whose
// instance target (with its native id) was observed not running; the
// instance is owed to cleanup (PhaseSuspended).
func (s *Service) RestoreAbandoned(ctx context.Context, a store.Allocation, op uuid.UUID, target sandbox.Compute) (store.Allocation, error) {
	return s.announced(s.store.AbandonRestore(ctx, a.ID, op, target))
}

// RestoreAbsent gives up unknown restore op of allocation a on its
// target's absence receipt, owing nothing (PhaseSuspended).
func (s *Service) RestoreAbsent(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error) {
	return s.announced(s.store.AbandonRestoreOnReceipt(ctx, a.ID, op))
}

// Expire ends allocation a, suspended or restoring past its snapshot's
// retention deadline (store.ExpireRetention: terminal cleanup), and
// publishes its phase change and what the cleanup changed (its Session,
// the Turns it settled or asked to cancel), as a deletion does.
func (s *Service) Expire(ctx context.Context, a store.Allocation) (store.Termination, error) {
	term, err := s.store.ExpireRetention(ctx, a.ID)
	if err == nil {
		s.announce(a.EnvironmentID)
		s.bus.Publish(events.Terminated(term.SessionID, term.SettledTurns, term.CancelRequested)...)
	}
	return term, err
}

// LeftoverDeleted records owed leftover id deleted by its provider.
func (s *Service) LeftoverDeleted(ctx context.Context, id int64) error {
	return s.store.MarkLeftoverDeleted(ctx, id)
}
