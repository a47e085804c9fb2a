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
// store, because every lifecycle write is fenced by the owner epoch. It is
// the union of what its pieces use (pieces.go), each through its own
// narrow interface.
type Store interface {
	workProbe
	pendingStore
	allocationStore
	suspensionStore
	candidateStore
	leftoverStore
	forkStore
	observeStore
}

// Suspension records the suspension cycle's outcomes: core/suspension's
// Service, the one writer of compute-phase state, which also announces
// each transition to the Runtime gateway. The worker only decides and
// calls the provider.
type Suspension interface {
	cycle
	armer
	leftoverRecorder
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

// Admission is what an owner failure closes: Core's admission of new
// Sessions (sessions.Service). It is a dependency, not an event: the
// refusal of an undrained retirement says admission is closed, so it must
// be closed when that refusal returns.
type Admission interface {
	CloseAdmission()
}

// OwnerFailures records an owner failure in the audit trail
// (audit.Writer.OwnerFailure): cause is which drain passed its bound,
// nodes the late workers' nodes. It must not block.
type OwnerFailures interface {
	OwnerFailure(cause string, nodes []uuid.UUID)
}

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
	// Serves, when set, says whether the direct lane can serve a Create
	// of a generation now (core/direct.Set.Serves); an error leaves the
	// allocation's create receipt fresh, to be claimed on a later pass.
	// Only the direct lane's worker asks it: a node's readiness is the
	// node's own. Nil serves every generation.
	Serves func(generation int64) error
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
	// Admission, when set, is closed each time a drain passes
	// DrainTimeout (an owner failure: sessions.Service.CloseAdmission,
	// until Core restarts), before the drain's refusal is returned, so
	// that refusal's "admission closed" is already true. It must not
	// block.
	Admission Admission
	// OwnerFailures, when set, records each owner failure (owner.failure,
	// Core's own decision) where Core closes admission.
	OwnerFailures OwnerFailures
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

// Worker is one node's serial lifecycle worker. Its passes must not run
// concurrently (the Coordinator runs at most one at a time).
type Worker struct {
	cfg  Config
	node uuid.UUID
	log  *slog.Logger
	// pieces are the scans of a pass, in order (pieces.go); observe is the
	// last of them, which also runs when the node has no provider.
	pieces  []piece
	observe *observer
	// probe says which pieces have work (store.ProbeNodeWork).
	probe workProbe
	// drain is closed by Drain: the worker stops at the end of the
	// operation in flight.
	drain     chan struct{}
	drainOnce sync.Once
}

// DirectLane is the key of the direct lane's worker, which serves every
// allocation without a node (store.DirectLane: the nil UUID, which no
// node id can be). The Coordinator runs it like a node's, and
// Config.Provider returns the direct proxy for it.
var DirectLane = store.DirectLane

// laneAttr names a worker's lane in its logs: lane=direct for the direct
// lane, node=<id> for a node.
func laneAttr(lane uuid.UUID) slog.Attr {
	if lane == DirectLane {
		return slog.String("lane", "direct")
	}
	return slog.String("node", lane.String())
}

// NewWorker returns the worker of node nodeID (DirectLane: the direct
// lane's).
func NewWorker(cfg Config, nodeID uuid.UUID) *Worker {
	cfg = cfg.withDefaults()
	log := cfg.Log.With(laneAttr(nodeID))
	pieces, observe := newPieces(&base{cfg: cfg, node: nodeID, log: log, tel: newTelemetry()})
	return &Worker{cfg: cfg, node: nodeID, log: log, pieces: pieces, observe: observe, probe: cfg.Store, drain: make(chan struct{})}
}

// Drain asks the worker to stop between operations: its pass returns once
// the store or provider operation in flight (a claim and its Create, a
// Kill and its record) has ended, and no other starts. Nothing in flight is
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

// Pass runs one bounded pass: one page (store.NodePageSize) of each
// piece in order (pieces.go): the node's pending allocations, its
// allocation work (creations and cleanups), its allocations in a
// suspension phase, its suspension candidates, its allocations owing
// leftovers, then its running allocations to observe. One probe
// (store.ProbeNodeWork) first says which of the first five have a row:
// until one of them runs, the others are skipped and keep their cursors,
// so an idle node's pass reads the probe and its observation page. From
// the first that runs on, every piece runs, since it may have made work
// for the later ones. Work committed by others after the probe waits for
// the next pass or the worker's wake, as work committed after a page's
// read does. Each piece advances its own cursor and wraps
// to the start after its last page; a drain stops the pass before the
// next piece, page or row. A failure of one allocation is logged and does
// not stop the page.
func (w *Worker) Pass(ctx context.Context) error {
	p, err := w.cfg.Provider(w.node)
	if err != nil {
		// Nothing is claimed or cleaned, but the node's running compute is
		// now unobservable, and is reported so (observeScan with no
		// provider records it unavailable, with the refusal's reason when
		// Core refused to call the node, observation_unavailable otherwise).
		if oerr := w.observe.observeScan(ctx, nil, err); errors.Is(oerr, store.ErrSuperseded) {
			return oerr
		}
		return err
	}
	work, err := w.probe.ProbeNodeWork(ctx, w.node)
	if err != nil {
		return err
	}
	for _, pc := range w.pieces {
		if err := halted(ctx); err != nil {
			return err
		}
		if !pc.wanted(work) {
			continue
		}
		if err := pc.pass(ctx, p); err != nil {
			return err
		}
		// A piece that ran may have made work for the later ones (a failed
		// or deleted Create for the allocation scan, a rolled-back capture
		// for the leftover scan): the rest of the pass runs every piece,
		// as a pass without the probe does.
		work = store.AllNodeWork
	}
	return nil
}

func (w *pendingScan) pass(ctx context.Context, p sandbox.SandboxProvider) error {
	page, err := w.store.ListPendingForNode(ctx, w.node, w.after, store.NodePageSize)
	if err != nil {
		return err
	}
	if len(page) == 0 {
		// Nothing pending (the usual idle pass): the cursor wraps and the
		// switch is not read.
		w.after = uuid.Nil
		return nil
	}
	// A disabled provider gets no new Create: the pending allocations keep
	// their fresh receipts and wait (the cursor stays), and the allocation
	// scan (cleanup, observation) goes on. ClaimCreate refuses too, for a
	// switch that flips during the page.
	sw, err := w.store.GetProviderSwitch(ctx)
	if err != nil {
		return err
	}
	if sw.Disabled {
		return nil
	}
	return scan(ctx, &w.after, page, func(pe store.Pending) uuid.UUID { return pe.EnvironmentID }, func(pe store.Pending) error {
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
func (w *pendingScan) allocate(ctx context.Context, pe store.Pending) (store.Allocation, error) {
	id := w.cfg.NewID()
	cred, err := sessions.NewSealedCredential(w.cfg.Key, w.cfg.Installation.ID, id)
	if err != nil {
		return store.Allocation{}, err
	}
	return w.store.AllocatePending(ctx, store.PendingAllocationParams{
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
func (w *pendingScan) create(ctx context.Context, p sandbox.SandboxProvider, id uuid.UUID) error {
	a, err := w.store.GetAllocation(ctx, id)
	if err != nil {
		return err
	}
	if a.State != store.AllocationAllocated || a.NodeID != w.node {
		return nil
	}
	gen, err := w.store.GetGeneration(ctx, uint64(a.Generation))
	if err != nil {
		return err
	}
	// A generation the direct lane cannot serve now (its adapter not
	// built, failing its probe, or fenced by a key change) keeps its
	// receipt fresh: the allocation
	// waits, as under a disabled provider, instead of spending the receipt
	// on a Create refused before any I/O.
	if w.node == DirectLane && w.cfg.Serves != nil {
		if err := w.cfg.Serves(a.Generation); err != nil {
			return nil
		}
	}
	// Everything that can fail before Create is done before the claim, so
	// a claimed receipt is always followed by the one Create.
	bootstrap, err := w.bootstrap(ctx, w.store, a)
	if err != nil {
		return err
	}
	req := sandbox.CreateRequest{Reference: a.Reference(), Resources: gen.Specification.Resources, Bootstrap: bootstrap,
		CoreCA: w.cfg.RuntimeCA}
	if err := req.Validate(); err != nil {
		return err
	}
	send, ok, err := w.createCall(ctx, p, a, req)
	if err != nil || !ok {
		return err
	}

	claimed, err := w.store.ClaimCreate(ctx, a.ID, a.CreateReceipt)
	if err != nil {
		// Fenced (spent receipt, cleanup first, or a superseded owner), a
		// disabled provider or a deployment reset (the receipt stays
		// fresh: it waits) or an unknown claim: no Create without a fresh
		// claim.
		if errors.Is(err, errdefs.ErrFenced) && !errors.Is(err, store.ErrSuperseded) ||
			errors.Is(err, store.ErrProviderDisabled) || errors.Is(err, store.ErrDeploymentResetting) {
			return nil
		}
		return err
	}
	ctx, end := w.tel.operation(ctx, opCreate, w.node, a.ID)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	info, callErr := send(callCtx)
	cancel()
	end(callErr)

	// Recorded against the claimed attempt: a deletion since the claim
	// moved the allocation's revision, and the outcome still counts.
	outcome := evidence(claimed.Reference(), info)
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	if _, err := w.store.RecordCreateOutcome(rctx, claimed.CreateAttempt(), outcome); err != nil {
		return err
	}
	if callErr != nil {
		w.log.InfoContext(ctx, "lifecycle create failed", "allocation", claimed.ID,
			"settled", outcome.Kind != store.CreateUnknown, "error", callErr)
	}
	return nil
}

// createCall is the one call a claimed Create sends for allocation a:
// Create, or for a fork's child CreateSeeded from its fork's snapshot of
// the source allocation (on another node than the source's, from that
// node's seed of it). ok is false while the fork is not ready (the
// receipt stays fresh; the pending scan lists a child only once it is,
// so this is a fork failed since the read).
func (w *pendingScan) createCall(ctx context.Context, p sandbox.SandboxProvider, a store.Allocation, req sandbox.CreateRequest) (
	send func(context.Context) (sandbox.Info, error), ok bool, err error,
) {
	if a.ForkID == nil {
		return func(ctx context.Context) (sandbox.Info, error) { return p.Create(ctx, req) }, true, nil
	}
	f, err := w.store.GetFork(ctx, *a.ForkID)
	if err != nil || f.State != store.ForkReady {
		return nil, false, err
	}
	src, err := w.store.GetAllocation(ctx, f.SourceAllocationID)
	if err != nil {
		return nil, false, err
	}
	cp := checkpointer(p)
	if cp == nil {
		return nil, false, errors.New("a fork's child on a provider without checkpoints")
	}
	snap := f.Snapshot
	if a.NodeID != f.NodeID {
		// Another node: its seed, a local copy of the fork's snapshot.
		s, err := w.store.GetForkSeed(ctx, f.ID, a.NodeID)
		if err != nil || s.State != store.SeedReady {
			return nil, false, err
		}
		snap = s.Snapshot
	}
	seeded := sandbox.SeededCreateRequest{Create: req, Owner: src.Reference(), Snapshot: snap}
	if err := seeded.Validate(); err != nil {
		return nil, false, err
	}
	return func(ctx context.Context) (sandbox.Info, error) { return cp.CreateSeeded(ctx, seeded) }, true, nil
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

func (w *allocationScan) pass(ctx context.Context, p sandbox.SandboxProvider) error {
	page, err := w.store.ListAllocationWorkForNode(ctx, w.node, w.after, store.NodePageSize)
	if err != nil {
		return err
	}
	return scan(ctx, &w.after, page, func(a store.Allocation) uuid.UUID { return a.ID }, func(a store.Allocation) error {
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
			if resolved, err = w.store.ResolveCreateFailure(ctx, a.ID, a.Revision); err == nil {
				err = w.cleanup(ctx, p, resolved)
			}
		}
		return w.passOn(err, "lifecycle allocation", "allocation", a.ID)
	})
}

// abandon gives up a Create still unknown after CreateAbandonAfter
// (store.AbandonCreate decides on the database clock) and starts its
// cleanup at once.
func (w *allocationScan) abandon(ctx context.Context, p sandbox.SandboxProvider, a store.Allocation) error {
	if a.State != store.AllocationCreateUnknown && a.State != store.AllocationCreateDispatched {
		return nil
	}
	abandoned, ok, err := w.store.AbandonCreate(ctx, a.ID, a.Revision, w.cfg.CreateAbandonAfter)
	if err != nil || !ok {
		return err
	}
	w.log.Info("lifecycle create abandoned", "allocation", a.ID,
		"environment", a.EnvironmentID, "after", w.cfg.CreateAbandonAfter)
	return w.cleanup(ctx, p, abandoned)
}

// observe reads the allocation's compute (GetInfo, bounded) and records
// settlement evidence: a settled running resource or an absence receipt.
// Anything else (ErrNotFound included) keeps creation unknown. It returns
// the allocation as recorded.
func (w *allocationScan) observe(ctx context.Context, p sandbox.SandboxProvider, a store.Allocation) (store.Allocation, error) {
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
	return w.store.RecordCreateOutcome(rctx, a.CreateAttempt(), outcome)
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
func (w *allocationScan) cleanup(ctx context.Context, p sandbox.SandboxProvider, a store.Allocation) error {
	if a.State != store.AllocationCleanupConfirmed || !a.CreationSettled() {
		var killErr error
		if a.CreateDispatchedAt != nil {
			// Terminal cleanup asked the Session's running Turn to cancel:
			// its Runtime may still report the result (store.CancelDrain),
			// which a Kill now would cut off, leaving the Turn unconfirmed.
			// A later pass kills.
			if draining, err := w.store.CancelDraining(ctx, a.ID); err != nil || draining {
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
		a, err = w.store.RecordCleanup(rctx, a.ID, a.Revision, killErr == nil)
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
	_, err := w.store.Release(ctx, a.ID)
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
func (w *base) passOn(err error, msg string, args ...any) error {
	if err == nil || errors.Is(err, store.ErrSuperseded) {
		return err
	}
	w.log.Warn(msg, append(args, "error", err)...)
	return nil
}
