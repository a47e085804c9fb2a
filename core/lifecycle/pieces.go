package lifecycle

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/sandbox"
)

// The worker's pass is a fixed sequence of pieces, each one scan with its
// own cursor (wrapping after its last page) and its own narrow store: the
// pending scan (Create), the allocation scan (cleanup, release, unknown
// creations), the suspension scans (suspension work, candidates,
// leftovers) and the observation scan (observe.go). A pass first probes
// which scans have a row (workProbe) and skips those without one until
// the first with one runs (Worker.Pass).

// piece is one scan of a worker's pass.
type piece interface {
	// pass runs one page of the scan with the node's provider p.
	pass(ctx context.Context, p sandbox.SandboxProvider) error
	// wanted reports whether the pass's probe (workProbe) found a row for
	// the scan; a scan not wanted is skipped and keeps its cursor.
	wanted(w store.NodeWork) bool
}

// workProbe is what a pass reads first: which scans have a row at all
// (store.ProbeNodeWork), so an idle node's pass reads one statement and
// its observation page instead of a page per scan.
type workProbe interface {
	ProbeNodeWork(ctx context.Context, nodeID uuid.UUID) (store.NodeWork, error)
}

func (*pendingScan) wanted(w store.NodeWork) bool    { return w.Pending }
func (*allocationScan) wanted(w store.NodeWork) bool { return w.AllocationWork }
func (*suspensionScan) wanted(w store.NodeWork) bool { return w.SuspensionWork }
func (*candidateScan) wanted(w store.NodeWork) bool  { return w.SuspensionCandidates }
func (*leftoverScan) wanted(w store.NodeWork) bool   { return w.Leftovers }

// wanted is always true for the observation scan: its page's due flags are
// its own probe.
func (*observer) wanted(store.NodeWork) bool { return true }

// base is what every piece of one worker shares: its node, settings and
// telemetry.
type base struct {
	cfg  Config
	node uuid.UUID
	// log is cfg.Log naming the worker's lane (laneAttr).
	log *slog.Logger
	tel telemetry
}

// credentialStore opens an allocation's sealed device credential, for a
// Create's and a restore's bootstrap file.
type credentialStore interface {
	GetAllocationCredential(ctx context.Context, id uuid.UUID) (store.SealedCredential, error)
}

// pendingStore is what the pending scan reads and writes.
type pendingStore interface {
	credentialStore
	GetProviderSwitch(ctx context.Context) (store.ProviderSwitch, error)
	ListPendingForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]store.Pending, error)
	AllocatePending(ctx context.Context, p store.PendingAllocationParams) (store.Allocation, error)
	GetAllocation(ctx context.Context, id uuid.UUID) (store.Allocation, error)
	GetFork(ctx context.Context, id uuid.UUID) (store.Fork, error)
	GetForkSeed(ctx context.Context, fork, node uuid.UUID) (store.ForkSeed, error)
	GetGeneration(ctx context.Context, n uint64) (store.Generation, error)
	ClaimCreate(ctx context.Context, id, receipt uuid.UUID) (store.Allocation, error)
	RecordCreateOutcome(ctx context.Context, attempt store.CreateAttempt, o store.CreateOutcome) (store.Allocation, error)
}

// pendingScan sends the one Create each fresh create receipt permits
// (worker.go).
type pendingScan struct {
	*base
	store pendingStore
	after uuid.UUID
}

// allocationStore is what the allocation scan reads and writes.
type allocationStore interface {
	ListAllocationWorkForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]store.Allocation, error)
	RecordCreateOutcome(ctx context.Context, attempt store.CreateAttempt, o store.CreateOutcome) (store.Allocation, error)
	ResolveCreateFailure(ctx context.Context, id uuid.UUID, revision int64) (store.Allocation, error)
	AbandonCreate(ctx context.Context, id uuid.UUID, revision int64, after time.Duration) (store.Allocation, bool, error)
	RecordCleanup(ctx context.Context, id uuid.UUID, revision int64, confirmed bool) (store.Allocation, error)
	CancelDraining(ctx context.Context, id uuid.UUID) (bool, error)
	Release(ctx context.Context, id uuid.UUID) (store.Allocation, error)
}

// allocationScan cleans up and releases, and observes and abandons
// unknown creations (worker.go).
type allocationScan struct {
	*base
	store allocationStore
	after uuid.UUID
}

// suspensionStore is what the suspension work scan reads.
type suspensionStore interface {
	credentialStore
	ListSuspensionWorkForNode(ctx context.Context, sc store.SuspensionWorkScan) ([]store.SuspensionWork, error)
	GetGeneration(ctx context.Context, n uint64) (store.Generation, error)
}

// cycle records the outcomes of the suspension work scan
// (core/suspension).
type cycle interface {
	Abort(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error)
	BeginCapture(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error)
	Captured(ctx context.Context, a store.Allocation, op uuid.UUID, snap sandbox.SnapshotIdentity) (store.Allocation, error)
	RolledBack(ctx context.Context, a store.Allocation, op uuid.UUID, computeID string, leftover *sandbox.SnapshotIdentity) (store.Allocation, error)
	PrepareRestore(ctx context.Context, a store.Allocation, op uuid.UUID, target sandbox.Compute) (store.Allocation, error)
	BeginRestore(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error)
	Restored(ctx context.Context, a store.Allocation, op uuid.UUID, computeID string) (store.Allocation, error)
	RestoreAbandoned(ctx context.Context, a store.Allocation, op uuid.UUID, target sandbox.Compute) (store.Allocation, error)
	RestoreAbsent(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error)
	Expire(ctx context.Context, a store.Allocation) (store.Termination, error)
}

// suspensionScan moves allocations in a suspension phase on: abort,
// capture, restore, expiry (suspend.go).
type suspensionScan struct {
	*base
	store suspensionStore
	susp  cycle
	after uuid.UUID
}

// candidateStore is what the candidate scan reads.
type candidateStore interface {
	ListSuspensionCandidatesForNode(ctx context.Context, sc store.SuspensionScan) ([]store.SuspensionCandidate, error)
}

// armer arms a suspension (core/suspension).
type armer interface {
	Arm(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error)
}

// candidateScan arms the suspension of idle Sessions (suspend.go).
type candidateScan struct {
	*base
	store candidateStore
	susp  armer
	after uuid.UUID
}

// leftoverStore is what the leftover scan reads.
type leftoverStore interface {
	ListAllocationsOwingLeftovers(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]uuid.UUID, error)
	GetAllocation(ctx context.Context, id uuid.UUID) (store.Allocation, error)
	ListOwedLeftovers(ctx context.Context, a store.Allocation) ([]store.Leftover, error)
}

// leftoverRecorder records a deleted leftover (core/suspension).
type leftoverRecorder interface {
	LeftoverDeleted(ctx context.Context, id int64) error
}

// leftoverScan deletes owed leftovers exactly (suspend.go).
type leftoverScan struct {
	*base
	store leftoverStore
	susp  leftoverRecorder
	after uuid.UUID
}

// observeStore is what the observation scan reads and writes.
type observeStore interface {
	ListObservableForNode(ctx context.Context, sc store.ObservableScan) ([]store.Observable, error)
	RecordObservation(ctx context.Context, p store.RecordObservationParams) (store.Allocation, error)
	RecordObservationMark(ctx context.Context, m store.ObservationMark, horizon time.Duration) error
}

// observer observes running compute and keeps it alive (observe.go).
type observer struct {
	*base
	store observeStore
	after uuid.UUID
}

// newPieces returns a worker's pieces in the order of its pass; the
// observer is also returned alone, for a pass without a provider.
func newPieces(b *base) ([]piece, *observer) {
	st, su := b.cfg.Store, b.cfg.Suspension
	obs := &observer{base: b, store: st}
	return []piece{
		&pendingScan{base: b, store: st},
		&allocationScan{base: b, store: st},
		&suspensionScan{base: b, store: st, susp: su},
		&candidateScan{base: b, store: st, susp: su},
		&leftoverScan{base: b, store: st, susp: su},
		&forkScan{base: b, store: st},
		obs,
	}, obs
}
