// Package lifecycle drives allocations to their provider: one serial
// Worker per node sends the one Create each fresh create receipt permits,
// observes unknown creations and cleans up deleted Sessions; a thin
// Coordinator starts and stops the workers.
//
// Rules (the guide's "Allocation lifecycle", "Per-node lifecycle workers"
// and "Operation outcomes and retries"):
//   - Create is sent only after ClaimCreate succeeded for that allocation,
//     and never again: an error or an unknown outcome is recorded as
//     create_unknown and later only observed (GetInfo).
//   - Only a settled running Info or an explicit absence receipt settles
//     creation; ErrNotFound, an empty listing or a successful Kill never do.
//     Such evidence counts also when the call that returned it failed (a
//     provider may return Info with its error): a failed Create's absence
//     receipt leads to create_failed, its settled running resource settles
//     as running. Any other Info of a failed call is no evidence.
//   - An outcome is recorded against the Create attempt
//     (store.CreateAttempt), not the revision the worker read: a Session
//     deleted while its Create is in flight keeps both the deletion and the
//     outcome, and is released after cleanup once creation settled.
//   - An allocation is released only after confirmed cleanup and settled
//     creation (the store enforces it too). While creation is unsettled,
//     each pass of a deleted Session's allocation kills again and then
//     observes: Kill is owned cleanup, the one call allowed to mutate to
//     settle a creation (the Docker adapter claims the Reference's names
//     with a tombstone when it finds no container, and GetInfo then
//     returns the absence receipt, recorded as store.CreateAbsent), and a
//     Kill that removed a container proves nothing by itself. A cleanup
//     whose Create was never sent (never claimed) sends no Kill: nothing
//     of the fresh Reference exists or ever will.
//   - An unknown creation of a live Session is observed, and killed only
//     once abandoned: when it has stayed unknown (not observed running)
//     for CreateAbandonAfter since its dispatch by the database clock
//     (store.AbandonCreate: the allocation's device is revoked and its
//     cleanup requested in one transaction). The cleanup then settles the
//     attempt as it settles a deleted Session's (below), and the release
//     keeps the Environment's reservation, so the pending scan gives it a
//     new allocation; after store.MaxCreateAttempts attempts without
//     compute the Environment is recorded failed (create_failed) instead.
//     Abandoning is no proof of failure: the cleanup must still settle
//     the attempt (the tombstone's receipt) before the release, and a
//     Create that would still have turned out running is lost, not
//     mistaken for absent; an abandoned attempt counts towards
//     MaxCreateAttempts. Before abandonment the allocation keeps its
//     reservation.
//   - Every provider call gets a bounded context; no database transaction
//     is held across a provider call (each store call is its own).
//   - A dispatched Create's outcome is recorded even when the pass's context
//     ends during the call: the record uses a detached, bounded context.
//   - The device credential is opened only to build the bootstrap file and
//     never reaches a log or an error.
//   - A pending Environment without an allocation (its previous allocation
//     ended in a settled Create failure and was released) gets a new
//     allocation with a new credential and receipt on its placement's node
//     (store.AllocatePending); an existing allocation never re-enters that
//     path. A create_failed allocation is cleaned up and released first
//     (store.ResolveCreateFailure), and after store.MaxCreateAttempts
//     settled failures the Environment is recorded failed instead.
//   - While the provider is disabled (store.ProviderSwitch, set by
//     DeploymentService.DisableProvider) the pending scan sends no new
//     Create and allocates nothing: pending allocations keep their fresh
//     receipts and wait until the provider is enabled again, and
//     store.ClaimCreate refuses a claim that races the switch. The
//     allocation scan goes on: cleanup (Kill, release) and the
//     observation of unknown creations are never blocked. Restores follow
//     the same rule (suspend.go): no restore is armed or claimed while
//     the provider is disabled (an admin's ResumeSession is kept and acted
//     on once it is enabled); an unknown restore is still observed.
//   - Suspension and wake (suspend.go) keep the same evidence rules as
//     Create. Where the guide is silent, decided as follows: an unknown
//     restore is never redone on a failed or empty observation (the
//     checkpoint contract has no absence receipt for a restore target),
//     only once its attempt's exact instance was observed not running and
//     then removed by its id; a capture is rolled back only on the
//     provider's definite answer that no complete snapshot exists
//     (ErrNotFound), never on a failed observation; a restore not recorded
//     by its retention deadline is expired, not recorded.
//   - Kill follows terminal cleanup only: an allocation's cleanup is
//     requested in the same transaction that revokes its device, records
//     the Environment's end, settles its queued Turns and requests
//     cancellation of the running one (store.Termination), so the worker
//     kills only what that transaction handed over; and not before the
//     running Turn's Runtime has reported the cancelled result or
//     store.CancelDrain has passed since the request (CancelDraining), so
//     the Kill does not make a cancelled Turn unconfirmed.
//   - Every store write is fenced by Core's owner epoch (the Store is bound
//     with store.Store.AsOwner): once another Core holds the execution
//     lease a write is store.ErrSuperseded, and the pass stops there.
//   - A node Core refuses to call (ProviderFunc's error; for a node whose
//     agent came back on another backend than the one it is bound to,
//     core/nodes.ErrBackendMismatch) gets no pass at all: nothing is
//     claimed, created, killed or released, so its allocations stay owned
//     until the node is back on its bound backend (or an operator abandons
//     them, core/nodes.Registry.Abandon). Its running compute is recorded
//     unavailable, with the refusal's reason (ReasonBackendMismatch), so
//     the Session API names why.
//
// Running compute (observe.go; the guide's "Four distinct readiness facts"
// and the GetInfo and Renew rows):
//   - Each pass also pages the node's running allocations with settled
//     creation (its own wrapping cursor, 32 rows, node filter before the
//     limit) and observes each whose last observation is older than
//     ObservePeriod less two Intervals (GetInfo, bounded, inside the
//     worker's serial pass and outside any transaction), so external
//     removal or a stop is recorded within one ObservePeriod. What it
//     found is recorded with a fixed code (store.RecordObservation: the
//     database clock, fenced by the owner epoch and the revision read):
//     running, stopped, missing (ErrNotFound or an absent state) or
//     unavailable (any other failure). Compute found running as last
//     recorded (no keepalive) is recorded for the whole page in one
//     transaction at the page's end (store.RecordObservations); a change,
//     a stop, a missing or unavailable observation and a keepalive are
//     recorded at once, each on its own. An observation is evidence only:
//     it never moves the allocation's state, requests cleanup, discards
//     volumes, starts or recreates compute. The Session API reports
//     compute_available false with that code (sessions.ComputeReason), and
//     the Turn sweep (core/turns) ends running Turns on compute observed
//     stopped or missing after their dispatch.
//   - Connected (an open Runtime connection of the lease holder), observed
//     running compute with no running Turn gets a keepalive (Renew) every
//     KeepaliveInterval instead of the GetInfo; its Info is recorded as the
//     observation (for Docker, Renew only reads state). A failed Renew is
//     followed by a GetInfo and confirms nothing. A keepalive lapse (none
//     confirmed for an hour) is never revived, and an allocation in
//     cleanup is never in the scan.
//   - Expiry: a node allocation never expires because its keepalive is
//     an hour old (the guide); deletion authorizes its cleanup, and so
//     does the end of a suspended snapshot's retention (suspend.go:
//     store.ExpireRetention records the Environment expired). Direct
//     providers with native leases (E2B) are not wired. A lapse only stops
//     keepalives.
//   - A restored incarnation (suspend.go) is observed with GetCompute on
//     its exact incarnation, and gets keepalives by the same rules as a
//     first incarnation (connected, observed running, no Turn running,
//     due and not lapsed); its keepalive is that same exact read, since
//     the checkpoint contract renews no incarnation and a checkpointing
//     backend has no native lease (as Renew on Docker only reads). Its
//     lapse counts from the restore (store.RecordRestored clears the
//     previous incarnation's keepalive). While its Runtime is not
//     connected each observation repeats the idempotent wake.
//   - Engine restart (Docker): a Session's container has no restart
//     policy, so after an engine restart it is exited. Core never starts
//     it again (GetInfo and Renew only read): the next observation records
//     it stopped and the Session reports compute_available false with
//     compute_stopped, within one ObservePeriod of the worker's first pass
//     after the node is reachable again; until then a failed observation
//     reports observation_unavailable. Its volumes (workspace, home) are
//     kept. With the engine's live-restore, or when something outside Core
//     starts the same container again, the container's command is the
//     Runtime daemon with its bootstrap file on the home volume: the next
//     observation finds it running, the Session reports it available and
//     its Runtime reconnects with its own credential (each readiness fact
//     keeps its own evidence). So after an engine restart every Session
//     either runs again with its workspace intact and its Runtime
//     reconnected, or is reported unavailable with compute_stopped (or
//     compute_missing, observation_unavailable); it is never reported
//     available while its container is stopped, for longer than one
//     ObservePeriod. A Session whose container stays stopped stays
//     unavailable until it is deleted.
//   - Drain: a worker is stopped (its node removed, its node retired, or
//     Core stopping before it releases the execution lease) between
//     operations, never inside one: Coordinator.Stop, Restart and Close
//     drain it (Worker.Drain: every scan stops before its next row or
//     page), so a claimed Create, a Kill or a capture in flight ends and
//     is recorded. The wait is bounded (DrainTimeout, the guide's five
//     seconds).
//   - A planned drain (Stop: a removed node's worker, as Sync stops it;
//     Restart: a retirement) past its bound cancels nothing: it is an
//     owner failure, logged and told to Config.OwnerFailure (Core closes
//     admission: every CreateSession is refused with owner_failure until
//     it restarts), and returns ErrUndrained. The late worker ends with its
//     operation and keeps the node's lifecycle identity until Core stops
//     (the drain barrier stays closed: no new worker, and every later Stop
//     or Restart of the node fails at once). Only Close, the owner's
//     shutdown, cancels past the bound (the guide: before releasing the
//     execution lease the coordinator cancels and drains every worker);
//     it reports the same owner failure and returns ErrDrainTimeout, and
//     the cancelled operation's outcome is then unknown (observed, never
//     replayed).
//   - Retirement: retiring nodes restarts their workers through the same
//     gate (Coordinator.Restart, given to the callers as Coordinator.Gate):
//     the workers drain between operations, all within one bound, the
//     retirement commits while none of them runs, and new workers (a new
//     lifecycle identity) go on creating what was placed on the nodes
//     before, observing and cleaning up (Core never moves a placement).
//     Both retirements use it: RetireNode (nodes.Registry.Retire) and a
//     deployment replacement with another provider kind, which retires
//     every enabled node in its commit (deployment.Service.Replace). Past
//     the bound the retirement is not made (the planned drain's owner
//     failure, above); the nodes whose workers did drain get new ones. A
//     replacement of the same kind restarts no worker: each allocation
//     keeps its own generation, and the placement fence is in the
//     database (store.ChoosePlacementNode, store.ReplaceGeneration).
package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// Store is what a lifecycle worker reads and writes: the owner-bound
// store, because every lifecycle write is fenced by the owner epoch.
type Store interface {
	GetGeneration(ctx context.Context, n uint64) (store.Generation, error)
	GetProviderSwitch(ctx context.Context) (store.ProviderSwitch, error)
	GetAllocation(ctx context.Context, id uuid.UUID) (store.Allocation, error)
	GetAllocationCredential(ctx context.Context, id uuid.UUID) (store.SealedCredential, error)
	ListAllocationsForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]store.Allocation, error)
	ListPendingForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]store.Pending, error)
	AllocatePending(ctx context.Context, p store.PendingAllocationParams) (store.Allocation, error)
	ClaimCreate(ctx context.Context, id, receipt uuid.UUID) (store.Allocation, error)
	RecordCreateOutcome(ctx context.Context, attempt store.CreateAttempt, o store.CreateOutcome) (store.Allocation, error)
	ResolveCreateFailure(ctx context.Context, id uuid.UUID, revision int64) (store.Allocation, error)
	AbandonCreate(ctx context.Context, id uuid.UUID, revision int64, after time.Duration) (store.Allocation, bool, error)
	RecordCleanup(ctx context.Context, id uuid.UUID, revision int64, confirmed bool) (store.Allocation, error)
	CancelDraining(ctx context.Context, id uuid.UUID) (bool, error)
	Release(ctx context.Context, id uuid.UUID) (store.Allocation, error)
	ListObservableForNode(ctx context.Context, sc store.ObservableScan) ([]store.Observable, error)
	RecordObservation(ctx context.Context, p store.RecordObservationParams) (store.Allocation, error)
	RecordObservations(ctx context.Context, ps []store.RecordObservationParams) ([]error, error)

	// The suspension cycle (suspend.go).
	ListSuspensionCandidatesForNode(ctx context.Context, sc store.SuspensionScan) ([]store.SuspensionCandidate, error)
	ListSuspensionWorkForNode(ctx context.Context, sc store.SuspensionWorkScan) ([]store.SuspensionWork, error)
	ListAllocationsOwingLeftovers(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]uuid.UUID, error)
	ListOwedLeftovers(ctx context.Context, a store.Allocation) ([]store.Leftover, error)
}

// Suspension records the suspension cycle's outcomes: core/suspension's
// Service, the one writer of compute-phase state, which also announces
// each transition to the Runtime gateway. The worker only decides and
// calls the provider.
type Suspension interface {
	Arm(ctx context.Context, a store.Allocation, op uuid.UUID) (store.Allocation, error)
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
	LeftoverDeleted(ctx context.Context, id int64) error
}

// Defaults of Config.
const (
	DefaultCallTimeout = 2 * time.Minute
	// DefaultDrainTimeout bounds a worker's drain (Coordinator.Stop,
	// Restart and Close): the guide's five-second lease-gate bound.
	DefaultDrainTimeout = 5 * time.Second
	// DefaultInterval is berth-core's default wait between passes
	// (core/daemon.DefaultLifecycleInterval says why); a Config that leaves
	// Interval zero gets the same.
	DefaultInterval = 2 * time.Second
	// DefaultCreateAbandonAfter is how long a Create's outcome may stay
	// unknown before the worker abandons it (store.AbandonCreate). A
	// Create takes about a second on the reference machine; a minute
	// leaves room for a slow engine and for a node agent's reconnection,
	// while a Session whose Create was lost still becomes ACTIVE (or
	// FAILED) within a couple of minutes.
	DefaultCreateAbandonAfter = time.Minute
	// recordTimeout bounds a store write that records a provider outcome.
	recordTimeout = 30 * time.Second
)

// ProviderFunc returns the provider of a node (Core passes its node
// manager's proxy). An error skips the node's pass: nothing is claimed.
type ProviderFunc func(nodeID uuid.UUID) (sandbox.SandboxProvider, error)

// Config is shared by the Coordinator and its workers.
type Config struct {
	// Store must act for Core's owner epoch (a *store.Owner, store.Store.AsOwner).
	Store Store
	// Suspension records every suspension outcome (core/suspension's
	// Service, bound to the same owner epoch as Store).
	Suspension Suspension
	// Key opens the sealed device credentials.
	Key secrets.Key
	// Installation gives the credentials' binding (ID) and the Runtime's
	// Core URL (PublicURL).
	Installation store.Installation
	Provider     ProviderFunc
	// CallTimeout bounds each provider call (DefaultCallTimeout when 0).
	CallTimeout time.Duration
	// Interval is the wait between passes (DefaultInterval when 0).
	Interval time.Duration
	// ObservePeriod bounds how long running compute goes unobserved
	// (DefaultObservePeriod when 0; observe.go).
	ObservePeriod time.Duration
	// CreateAbandonAfter is how long, since its dispatch by the database
	// clock, a Create's outcome may stay unknown before the worker abandons
	// it (DefaultCreateAbandonAfter when 0; at least a second).
	CreateAbandonAfter time.Duration
	// KeepaliveInterval is the wait between keepalives (Renew) to
	// connected, observed, running compute between Turns
	// (DefaultKeepaliveInterval when 0).
	KeepaliveInterval time.Duration
	// QuiesceTimeout is how long an armed suspension waits for the
	// Runtime's acknowledgement (DefaultQuiesceTimeout when 0).
	QuiesceTimeout time.Duration
	// RestoreAbandonAfter is how long a restore's outcome may stay unknown,
	// with the attempt's incarnation observed not running, before it is
	// abandoned (DefaultRestoreAbandonAfter when 0; suspend.go).
	RestoreAbandonAfter time.Duration
	// DrainTimeout is how long a drain waits for a worker to reach the end
	// of the store or provider operation in flight (DefaultDrainTimeout
	// when 0): past it a planned drain (Coordinator.Stop, Restart) is an
	// owner failure and cancels nothing, and Close cancels.
	DrainTimeout time.Duration
	// OwnerFailure, when set, is told the nodes of the late workers each
	// time a drain passes DrainTimeout (Core closes admission until it
	// restarts: sessions.Service.CloseAdmission). It must not block.
	OwnerFailure func(nodes []uuid.UUID)
	// RuntimeCA is the PEM CA certificate a Runtime trusts for the
	// installation's https URL when Core's gateway certificate is issued
	// from the installation CA; every Create and restore sends it
	// (sandbox.CreateRequest.CoreCA). Empty: none (an operator's
	// certificate from a public CA, or plaintext).
	RuntimeCA []byte
	// NewID makes the ids of new allocations and operations (uuid.New
	// when nil).
	NewID func() uuid.UUID
	Log   *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.ObservePeriod <= 0 {
		c.ObservePeriod = DefaultObservePeriod
	}
	if c.CreateAbandonAfter <= 0 {
		c.CreateAbandonAfter = DefaultCreateAbandonAfter
	}
	if c.KeepaliveInterval <= 0 {
		c.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if c.QuiesceTimeout <= 0 {
		c.QuiesceTimeout = DefaultQuiesceTimeout
	}
	if c.RestoreAbandonAfter <= 0 {
		c.RestoreAbandonAfter = DefaultRestoreAbandonAfter
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.NewID == nil {
		c.NewID = uuid.New
	}
	return c
}

// Worker is one node's serial lifecycle worker. Its methods must not be
// called concurrently (Run calls Pass in a loop).
type Worker struct {
	cfg  Config
	node uuid.UUID
	// tel is the worker's tracer and instruments (telemetry.go).
	tel telemetry
	// pendingAfter, allocAfter and observeAfter are the per-node cursors of
	// the pending, the allocation and the observation scans; uuid.Nil is
	// the start.
	pendingAfter uuid.UUID
	allocAfter   uuid.UUID
	observeAfter uuid.UUID
	// suspendAfter, candidateAfter and leftoverAfter are the cursors of
	// the suspension scans (suspend.go).
	suspendAfter   uuid.UUID
	candidateAfter uuid.UUID
	leftoverAfter  uuid.UUID
	wake           chan struct{}
	// drain is closed by Drain: the worker stops at the end of the
	// operation in flight.
	drain     chan struct{}
	drainOnce sync.Once
}

// NewWorker returns the worker of node nodeID.
func NewWorker(cfg Config, nodeID uuid.UUID) *Worker {
	return &Worker{cfg: cfg.withDefaults(), node: nodeID, tel: newTelemetry(), wake: make(chan struct{}, 1), drain: make(chan struct{})}
}

// Drain asks the worker to stop between operations: Run returns once the
// store or provider operation in flight (a claim and its Create, a Kill
// and its record) has ended, and no other starts. Nothing in flight is
// cancelled; Coordinator bounds the wait (DrainTimeout).
func (w *Worker) Drain() { w.drainOnce.Do(func() { close(w.drain) }) }

// errDrained ends a pass that a drain stopped between operations.
var errDrained = errors.New("lifecycle worker drained")

// drainKey carries the worker's drain channel in a pass's context, so
// every scan stops between rows (halted).
type drainKey struct{}

// halted is ctx's error, or errDrained once the worker running the pass
// is draining: checked before every row and page, never inside an
// operation.
func halted(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ch, ok := ctx.Value(drainKey{}).(chan struct{}); ok {
		select {
		case <-ch:
			return errDrained
		default:
		}
	}
	return nil
}

// Node returns the worker's node.
func (w *Worker) Node() uuid.UUID { return w.node }

// Wake asks for a pass now instead of after the interval.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run runs passes until ctx ends or the worker is drained (Drain).
func (w *Worker) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	ctx = context.WithValue(ctx, drainKey{}, w.drain)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.drain:
			return
		case <-t.C:
		case <-w.wake:
		}
		err := w.Pass(ctx)
		if errors.Is(err, errDrained) {
			return
		}
		if err != nil && ctx.Err() == nil {
			w.cfg.Log.Warn("lifecycle pass failed", "node", w.node, "error", err)
		}
		t.Reset(w.cfg.Interval)
	}
}

// Pass runs one bounded pass: one page (store.NodePageSize) of the node's
// pending allocations, then one page of its unreleased allocations, then
// one page of each suspension scan (suspensionPage), then one page of its
// running allocations to observe (observePage). Each scan
// advances its own cursor and wraps to the start after its last page.
// A failure of one allocation is logged and does not stop the page.
func (w *Worker) Pass(ctx context.Context) error {
	p, err := w.cfg.Provider(w.node)
	if err != nil {
		// Nothing is claimed or cleaned, but the node's running compute is
		// now unobservable, and is reported so (observeScan with no
		// provider records it unavailable, with the refusal's reason when
		// Core refused to call the node, observation_unavailable otherwise).
		if oerr := w.observeScan(ctx, nil, err); errors.Is(oerr, store.ErrSuperseded) {
			return oerr
		}
		return err
	}
	for _, page := range []func(context.Context, sandbox.SandboxProvider) error{
		w.pendingPage, w.allocationPage, w.suspensionPage, w.observePage,
	} {
		if err := halted(ctx); err != nil {
			return err
		}
		if err := page(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (w *Worker) pendingPage(ctx context.Context, p sandbox.SandboxProvider) error {
	// A disabled provider gets no new Create: the pending allocations keep
	// their fresh receipts and wait (the cursor stays), and the allocation
	// scan (cleanup, observation) goes on. ClaimCreate refuses too, for a
	// switch that flips during the page.
	sw, err := w.cfg.Store.GetProviderSwitch(ctx)
	if err != nil {
		return err
	}
	if sw.Disabled {
		return nil
	}
	page, err := w.cfg.Store.ListPendingForNode(ctx, w.node, w.pendingAfter, store.NodePageSize)
	if err != nil {
		return err
	}
	return scan(ctx, &w.pendingAfter, page, func(pe store.Pending) uuid.UUID { return pe.EnvironmentID }, func(pe store.Pending) error {
		// An Environment whose Session is being deleted gets no Create here
		// (deletion already spent the receipt).
		if pe.SessionState != store.SessionActive {
			return nil
		}
		id := pe.AllocationID
		if id == uuid.Nil {
			a, err := w.allocate(ctx, pe)
			if err != nil {
				return w.passOn(err, "lifecycle allocate", "environment", pe.EnvironmentID)
			}
			id = a.ID
		}
		return w.passOn(w.create(ctx, p, id), "lifecycle create", "allocation", id)
	})
}

// allocate commits a new allocation, with a new device credential and
// create receipt, for a pending Environment that has none.
func (w *Worker) allocate(ctx context.Context, pe store.Pending) (store.Allocation, error) {
	id := w.cfg.NewID()
	cred, err := sessions.NewSealedCredential(w.cfg.Key, w.cfg.Installation.ID, id)
	if err != nil {
		return store.Allocation{}, err
	}
	return w.cfg.Store.AllocatePending(ctx, store.PendingAllocationParams{
		EnvironmentID:        pe.EnvironmentID,
		NodeID:               w.node,
		AllocationID:         id,
		DeviceID:             w.cfg.NewID(),
		CredentialDigest:     cred.Digest,
		CredentialCiphertext: cred.Ciphertext,
		CredentialNonce:      cred.Nonce,
		CreateReceipt:        w.cfg.NewID(),
	})
}

// create claims the allocation's create receipt and, only when the claim
// succeeded, sends Create once and records its outcome.
func (w *Worker) create(ctx context.Context, p sandbox.SandboxProvider, id uuid.UUID) error {
	a, err := w.cfg.Store.GetAllocation(ctx, id)
	if err != nil {
		return err
	}
	if a.State != store.AllocationAllocated || a.NodeID != w.node {
		return nil
	}
	gen, err := w.cfg.Store.GetGeneration(ctx, uint64(a.Generation))
	if err != nil {
		return err
	}
	// Everything that can fail before Create is done before the claim, so
	// a claimed receipt is always followed by the one Create.
	bootstrap, err := w.bootstrap(ctx, a)
	if err != nil {
		return err
	}
	req := sandbox.CreateRequest{Reference: a.Reference(), Resources: gen.Specification.Resources, Bootstrap: bootstrap,
		CoreCA: w.cfg.RuntimeCA}
	if err := req.Validate(); err != nil {
		return err
	}

	claimed, err := w.cfg.Store.ClaimCreate(ctx, a.ID, a.CreateReceipt)
	if err != nil {
		// Fenced (spent receipt, cleanup first, or a superseded owner), a
		// disabled provider (the receipt stays fresh: it waits) or an
		// unknown claim: no Create without a fresh claim.
		if errors.Is(err, errdefs.ErrFenced) && !errors.Is(err, store.ErrSuperseded) ||
			errors.Is(err, store.ErrProviderDisabled) {
			return nil
		}
		return err
	}
	ctx, end := w.tel.operation(ctx, opCreate, w.node, a.ID)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	info, callErr := p.Create(callCtx, req)
	cancel()
	end(callErr)

	// Recorded against the claimed attempt: a deletion since the claim
	// moved the allocation's revision, and the outcome still counts.
	outcome := evidence(claimed.Reference(), info)
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	if _, err := w.cfg.Store.RecordCreateOutcome(rctx, claimed.CreateAttempt(), outcome); err != nil {
		return err
	}
	if callErr != nil {
		w.cfg.Log.InfoContext(ctx, "lifecycle create failed", "node", w.node, "allocation", claimed.ID,
			"settled", outcome.Kind != store.CreateUnknown, "error", callErr)
	}
	return nil
}

// evidence is the settlement evidence info holds for ref, whether or not
// the call that returned it failed: a running resource with completed
// bootstrap, or an explicit absence receipt. Anything else, a
// contradictory Info included, is no evidence: the outcome stays unknown.
// A failure is never turned into success: an absence receipt records the
// Create failed, and a running resource is recorded only because the
// provider observed it running with its bootstrap complete.
func evidence(ref sandbox.Reference, info sandbox.Info) store.CreateOutcome {
	switch {
	case info.CheckFor(ref) != nil:
	case info.IsAbsenceReceipt(ref):
		return store.CreateOutcome{Kind: store.CreateAbsent}
	case info.IsSettledRunning(ref):
		return store.CreateOutcome{Kind: store.CreateRunning, ProviderID: info.ProviderID, BootstrapComplete: true}
	}
	return store.CreateOutcome{Kind: store.CreateUnknown}
}

func (w *Worker) allocationPage(ctx context.Context, p sandbox.SandboxProvider) error {
	page, err := w.cfg.Store.ListAllocationsForNode(ctx, w.node, w.allocAfter, store.NodePageSize)
	if err != nil {
		return err
	}
	return scan(ctx, &w.allocAfter, page, func(a store.Allocation) uuid.UUID { return a.ID }, func(a store.Allocation) error {
		var err error
		switch a.State {
		case store.AllocationCleanupRequested, store.AllocationCleanupUnknown, store.AllocationCleanupConfirmed:
			err = w.cleanup(ctx, p, a)
		case store.AllocationCreateUnknown, store.AllocationCreateDispatched:
			// create_dispatched here means a pass ended between its claim
			// and its record (this worker is serial): the outcome is unknown.
			var observed store.Allocation
			if observed, err = w.observe(ctx, p, a); err == nil {
				err = w.abandon(ctx, p, observed)
			}
		case store.AllocationCreateFailed:
			// Create settled without a resource: clean up what it may have
			// left, then release, so the Environment gets a new allocation
			// (or is recorded failed after store.MaxCreateAttempts).
			var resolved store.Allocation
			if resolved, err = w.cfg.Store.ResolveCreateFailure(ctx, a.ID, a.Revision); err == nil {
				err = w.cleanup(ctx, p, resolved)
			}
		}
		return w.passOn(err, "lifecycle allocation", "allocation", a.ID)
	})
}

// abandon gives up a Create still unknown after CreateAbandonAfter
// (store.AbandonCreate decides on the database clock) and starts its
// cleanup at once.
func (w *Worker) abandon(ctx context.Context, p sandbox.SandboxProvider, a store.Allocation) error {
	if a.State != store.AllocationCreateUnknown && a.State != store.AllocationCreateDispatched {
		return nil
	}
	abandoned, ok, err := w.cfg.Store.AbandonCreate(ctx, a.ID, a.Revision, w.cfg.CreateAbandonAfter)
	if err != nil || !ok {
		return err
	}
	w.cfg.Log.Info("lifecycle create abandoned", "node", w.node, "allocation", a.ID,
		"environment", a.EnvironmentID, "after", w.cfg.CreateAbandonAfter)
	return w.cleanup(ctx, p, abandoned)
}

// observe reads the allocation's compute (GetInfo, bounded) and records
// settlement evidence: a settled running resource or an absence receipt.
// Anything else (ErrNotFound included) keeps creation unknown. It returns
// the allocation as recorded.
func (w *Worker) observe(ctx context.Context, p sandbox.SandboxProvider, a store.Allocation) (store.Allocation, error) {
	ref := a.Reference()
	ctx, end := w.tel.operation(ctx, opObserve, w.node, a.ID)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	info, callErr := p.GetInfo(callCtx, ref) // an error is no evidence; its Info may be
	cancel()
	end(callErr)
	outcome := evidence(ref, info)
	if outcome.Kind == store.CreateUnknown && (a.State != store.AllocationCreateDispatched) {
		return a, nil // nothing new
	}
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	return w.cfg.Store.RecordCreateOutcome(rctx, a.CreateAttempt(), outcome)
}

// cleanup kills the allocation's compute and, once cleanup is confirmed
// and creation settled, releases it. An unsettled creation is observed
// after the confirmed cleanup; until it settles the allocation keeps its
// cleanup ownership (and its reservation), and each pass kills again
// before it observes: Kill is the only call that may mutate to settle a
// creation (the Docker adapter claims the Reference's names with a
// tombstone when it finds no container, and GetInfo then returns the
// absence receipt), and a Kill that removed a container settles nothing
// by itself.
func (w *Worker) cleanup(ctx context.Context, p sandbox.SandboxProvider, a store.Allocation) error {
	if a.State != store.AllocationCleanupConfirmed || !a.CreationSettled() {
		var killErr error
		if a.CreateDispatchedAt != nil {
			// Terminal cleanup asked the Session's running Turn to cancel:
			// its Runtime may still report the result (store.CancelDrain),
			// which a Kill now would cut off, leaving the Turn unconfirmed.
			// A later pass kills.
			if draining, err := w.cfg.Store.CancelDraining(ctx, a.ID); err != nil || draining {
				return err
			}
			kctx, end := w.tel.operation(ctx, opKill, w.node, a.ID)
			callCtx, cancel := context.WithTimeout(kctx, w.cfg.CallTimeout)
			killErr = p.Kill(callCtx, sandbox.KillRequest{Reference: a.Reference(), CreateSettled: a.CreationSettled()})
			cancel()
			end(killErr)
		}
		// Otherwise no Create was ever sent: Create follows only a
		// successful ClaimCreate, which records the dispatch in the same
		// compare-and-swap, and RequestCleanup spent the receipt, so none
		// ever will be. The Reference is fresh, so nothing of it exists;
		// a Kill could only claim its names (a Docker tombstone) for
		// nothing.
		rctx, rcancel := recordContext(ctx)
		var err error
		a, err = w.cfg.Store.RecordCleanup(rctx, a.ID, a.Revision, killErr == nil)
		rcancel()
		if err != nil {
			return err
		}
		if killErr != nil {
			return killErr
		}
	}
	if !a.CreationSettled() {
		observed, err := w.observe(ctx, p, a)
		if err != nil {
			return err
		}
		// A resource observed after Kill confirmed absence (a late
		// resource) takes the confirmation back (store.RecordCreateOutcome):
		// the next pass kills it before the release.
		if observed.State != store.AllocationCleanupConfirmed || !observed.CreationSettled() {
			return nil
		}
		a = observed
	}
	_, err := w.cfg.Store.Release(ctx, a.ID)
	return err
}

// recordContext is the bounded context of a store write that records a
// provider outcome: detached from ctx's cancellation, so an outcome is not
// lost because the caller stopped waiting.
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}

// scan moves *cursor past page, a page of up to store.NodePageSize rows
// keyed by id: to its last row's key, or back to the start (wrap) after the
// last page. It then hands the rows to do in order, until ctx ends or do
// returns an error: the shared shape of the pending, allocation and
// observation scans.
func scan[T any](ctx context.Context, cursor *uuid.UUID, page []T, id func(T) uuid.UUID, do func(T) error) error {
	*cursor = uuid.Nil
	if len(page) >= store.NodePageSize {
		*cursor = id(page[len(page)-1])
	}
	for _, row := range page {
		if err := halted(ctx); err != nil {
			return err
		}
		if err := do(row); err != nil {
			return err
		}
	}
	return nil
}

// passOn is what a scan does with a row's error: ErrSuperseded comes back
// (this owner epoch lost the lease, so the pass stops there); any other is
// logged as msg with the node, args and the error, and the scan goes on
// with the next row.
func (w *Worker) passOn(err error, msg string, args ...any) error {
	if err == nil || errors.Is(err, store.ErrSuperseded) {
		return err
	}
	w.cfg.Log.Warn(msg, append(append([]any{"node", w.node}, args...), "error", err)...)
	return nil
}
