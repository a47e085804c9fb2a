package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// Defaults of the observation of running compute.
const (
	// DefaultObservePeriod bounds how long running compute goes without an
	// observation: a container stopped or removed from outside is reported
	// (compute_available false) at most this long after it happened, at
	// one GetInfo per running allocation every 6 to 8 seconds (see
	// observeWait). Ten seconds keeps that bound well inside a client's
	// patience for a dead Session while a node with a full page of 32
	// running allocations costs about four small engine reads per second.
	// It holds while a pass visits each of the node's pages at least
	// every 8 seconds: up to 4 pages (128 running allocations on one node)
	// with 2-second passes; beyond that the bound grows with the page
	// count (the deployment's max_active bounds it).
	DefaultObservePeriod = 10 * time.Second
	// DefaultKeepaliveInterval is the wait between service keepalives
	// (Renew) to connected, observed, running compute between Turns. Five
	// minutes gives a backend with a native lease twelve chances before
	// the one-hour lapse after which keepalives stop for good, and costs
	// Docker (whose Renew only reads state) nothing the observation does
	// not already.
	DefaultKeepaliveInterval = 5 * time.Minute
)

// The fixed reason codes of an observation (store.Observation.Reason),
// which the Session API reports as compute_reason and the Turn sweep as a
// running Turn's failure code. They never carry a provider's message.
const (
	ReasonRunning = "compute_running"
	// ReasonStopped: the owned compute exists and is not running (exited,
	// created and never started, or stopped by an engine restart).
	ReasonStopped = "compute_stopped"
	// ReasonPaused: the owned compute is paused.
	ReasonPaused = "compute_paused"
	// ReasonMissing: the provider did not find the compute (ErrNotFound, or
	// an absent state). Only a missing observation: it proves no absence
	// and authorizes no cleanup.
	ReasonMissing = "compute_missing"
	// ReasonReplaced: another native instance answers for the allocation's
	// Reference than the one its Create settled with.
	ReasonReplaced = "compute_replaced"
	// ReasonUnavailable: the observation failed (timeout, unreachable node,
	// ownership mismatch, a contradictory Info): nothing was observed.
	ReasonUnavailable = "observation_unavailable"
	// ReasonBackendMismatch: nothing was observed because Core sends
	// nothing to a node whose agent runs against another engine than the
	// node is bound to (the refusal core/nodes.ErrBackendMismatch, whose
	// reason it is): the compute may well run on the bound engine.
	ReasonBackendMismatch = "backend_fingerprint_mismatch"
)

// observeWait is how old an observation may be before the scan repeats
// it: the period less two pass intervals. A due observation waits for the
// next pass, which starts up to one Interval after the previous pass
// ended, and the pass itself takes time; the second Interval is that
// margin, so every running allocation is observed within one period.
func (c Config) observeWait() time.Duration {
	if d := c.ObservePeriod - 2*c.Interval; d > time.Microsecond {
		return d
	}
	return time.Microsecond
}

// pass runs one page (store.NodePageSize) of the observation scan:
// the node's running allocations with settled creation, in id order, with
// its own cursor that wraps after the last page. For each allocation whose
// observation is due it reads the compute (GetInfo) and records what it
// found; to connected, observed, running compute between Turns whose
// keepalive is due and has not lapsed it sends a keepalive (Renew)
// instead, whose Info is the observation. Each call is bounded and made
// outside any transaction; each record is its own owner-fenced write.
// With no provider (the node is not connected, or Core refuses to call
// it) a due observation is recorded unavailable without a call, so a
// Session on an unreachable node is not reported available on the
// strength of an old observation (observeScan).
func (w *observer) pass(ctx context.Context, p sandbox.SandboxProvider) error {
	return w.observeScan(ctx, p, errdefs.ErrObservationUnavailable)
}

// observeScan is observePage; with no provider p, unreachable is why
// (ProviderFunc's error): a refusal (errdefs.Refusal, Core's own: the node
// protocol carries none) is recorded with its fixed reason, such as the
// node's backend_fingerprint_mismatch, anything else as
// observation_unavailable (observed).
func (w *observer) observeScan(ctx context.Context, p sandbox.SandboxProvider, unreachable error) error {
	// Only a refusal keeps its own meaning: any other reason there is no
	// provider (ErrNotFound for a node without a connection loop among
	// them) observed nothing, and is never a missing observation.
	if r, ok := errdefs.AsRefusal(unreachable); ok {
		unreachable = r
	} else {
		unreachable = errdefs.ErrObservationUnavailable
	}
	page, err := w.store.ListObservableForNode(ctx, store.ObservableScan{
		NodeID: w.node, After: w.after, Limit: store.NodePageSize,
		ObserveAfter: w.cfg.observeWait(), KeepaliveAfter: w.cfg.KeepaliveInterval,
	})
	if err != nil {
		return err
	}
	// The page's plain observations (due, no keepalive, a first
	// incarnation) are read in one call where the provider batches them
	// (observeBatch). Compute found running again, as last recorded, gets
	// no write of its own: the page's one mark lists it
	// (store.RecordObservationMark), at the page's end. Anything else (a
	// change, a stop, a missing or unavailable observation, a keepalive)
	// is recorded at once, on its own, as before: the Turn sweep and the
	// Session API act on it.
	batched := w.observeBatch(ctx, p, page)
	var unchanged []uuid.UUID
	defer func() { w.recordMark(ctx, page, unchanged) }()
	return scan(ctx, &w.after, page, func(o store.Observable) uuid.UUID { return o.ID }, func(o store.Observable) error {
		same, err := w.observeRunning(ctx, p, o, unreachable, batched)
		if same {
			unchanged = append(unchanged, o.ID)
		}
		if errors.Is(err, errdefs.ErrFenced) && !errors.Is(err, store.ErrSuperseded) {
			return nil // fenced: cleanup or another transition won
		}
		return w.passOn(err, "lifecycle observe", "allocation", o.ID)
	})
}

// markHorizon is how long a mark counts: three periods, so that a row
// left out of a page's newer marks (a failed call, a row not yet due)
// keeps its time until it is due again, while a lane holds only a few
// marks per page.
func (c Config) markHorizon() time.Duration { return 3 * c.ObservePeriod }

// recordMark records that ids, rows of page, were observed running as
// recorded after the page's read (detached from ctx's cancellation, like
// every record of a provider outcome, and bounded).
func (w *observer) recordMark(ctx context.Context, page []store.Observable, ids []uuid.UUID) {
	if len(ids) == 0 {
		return
	}
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	err := w.store.RecordObservationMark(rctx, store.ObservationMark{Lane: w.node, ReadAt: page[0].ReadAt, IDs: ids}, w.cfg.markHorizon())
	if err != nil && !errors.Is(err, store.ErrSuperseded) {
		w.log.Warn("lifecycle observe", "allocations", len(ids), "error", err)
	}
}

// infoBatcher is a provider that reads many allocations' compute in one
// call: core/nodes.Proxy, over the node protocol's ObserveBatch. Each
// result is at its reference's index: an Info that answers for it, or the
// error GetInfo would have given. The call's own error is for every
// target; only a typed UnsupportedError for ObserveBatch permits
// per-target calls (the guide).
type infoBatcher interface {
	GetInfoBatch(ctx context.Context, refs []sandbox.Reference) ([]sandbox.Info, []error, error)
}

// batchResult is one target's answer of a page's batch.
type batchResult struct {
	info sandbox.Info
	err  error
}

// observeBatch reads, in one call, every row of page that observeRunning
// would read with GetInfo (due, no keepalive wanted, a first incarnation),
// when p batches (infoBatcher) and there is one. It returns the
// answers by allocation id; nil, and so per-target calls, when there is
// nothing to batch, p does not batch, or p answered the typed unsupported
// error for ObserveBatch. Any other failure of the call is every target's
// unavailable observation: it proves nothing of any one target, and a
// not-found answer for the call (an allocation Core no longer knows) is
// not a missing observation.
func (w *observer) observeBatch(ctx context.Context, p sandbox.SandboxProvider, page []store.Observable) map[uuid.UUID]batchResult {
	b, ok := p.(infoBatcher)
	if !ok {
		return nil
	}
	var ids []uuid.UUID
	var refs []sandbox.Reference
	for _, o := range page {
		if o.ObservationDue && o.ComputeName == "" && !keepaliveWanted(o, w.node == DirectLane) {
			ids = append(ids, o.ID)
			refs = append(refs, o.Reference())
		}
	}
	if len(refs) == 0 {
		return nil
	}
	ctx, end := w.tel.operationWith(ctx, opObserveBatch, laneAttribute(w.node), attribute.Int("berth.targets", len(refs)))
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	infos, errs, err := b.GetInfoBatch(callCtx, refs)
	cancel()
	end(err)
	if sandbox.IsUnsupportedOp(err, sandbox.OpObserveBatch) {
		return nil
	}
	if err == nil && (len(infos) != len(refs) || len(errs) != len(refs)) {
		err = errdefs.ErrObservationUnavailable
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		err = errdefs.ErrObservationUnavailable
	}
	out := make(map[uuid.UUID]batchResult, len(ids))
	for i, id := range ids {
		if err != nil {
			out[id] = batchResult{err: err}
			continue
		}
		out[id] = batchResult{info: infos[i], err: errs[i]}
	}
	return out
}

// keepaliveWanted reports whether o gets a keepalive now: its Runtime is
// connected, no Turn of its Session runs (unless duringTurns), its last
// observation found it running, and a keepalive is due and has not
// lapsed. A lapse (no keepalive confirmed for an hour) is never revived,
// and an allocation in cleanup is never in the scan.
//
// duringTurns is true on the direct lane: a direct provider's native lease
// (E2B's sandbox timeout) ends compute even in the middle of a Turn, so
// the guide's keepalive "between Turns" would let a Turn longer than the
// lease lose its sandbox. Node backends have no such lease (Docker's and
// microsandbox's Renew only observe), so their Turns get none.
func keepaliveWanted(o store.Observable, duringTurns bool) bool {
	return o.RuntimeConnected && (duringTurns || !o.TurnRunning) && o.Observation.Compute == store.ObservedRunning &&
		o.KeepaliveDue && !o.KeepaliveLapsed
}

// observeRunning observes o when due, with its answer from the page's
// batch when batched holds one. Compute found running as last recorded,
// with no keepalive to confirm, is reported (same) for the page's mark
// instead of recorded here; everything else is recorded at once.
func (w *observer) observeRunning(ctx context.Context, p sandbox.SandboxProvider, o store.Observable, unreachable error,
	batched map[uuid.UUID]batchResult) (same bool, err error) {
	keepalive := p != nil && keepaliveWanted(o, w.node == DirectLane)
	if !keepalive && !o.ObservationDue {
		return false, nil
	}
	ref := o.Reference()
	var (
		info    sandbox.Info
		callErr error
	)
	cp := checkpointer(p)
	restored := o.ComputeName != ""
	b, inBatch := batched[o.ID]
	end := func(error) {}
	if p != nil && (!restored || cp != nil) && !inBatch {
		op := opObserve
		if keepalive {
			op = opKeepalive
		}
		ctx, end = w.tel.operation(ctx, op, w.node, o.ID)
	}
	switch {
	case p == nil:
		callErr = unreachable
	case inBatch:
		info, callErr = b.info, b.err
	case restored && cp == nil:
		callErr = errdefs.ErrObservationUnavailable
	case restored:
		// A restored incarnation is observed exactly (GetCompute): the
		// Reference-level GetInfo and Renew address the Create's. Its
		// keepalive follows a first incarnation's rules (keepaliveWanted)
		// and is the same exact read: the checkpoint contract has no
		// renewal of an incarnation, and a checkpointing backend (node
		// mode only) has no native lease to extend, so, as Renew on a
		// backend without leases, the keepalive is a confirmed
		// observation of running compute.
		info, callErr = w.getCompute(ctx, cp, o.Allocation)
	case keepalive:
		callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		info, callErr = p.Renew(callCtx, ref)
		cancel()
		if callErr != nil && !errors.Is(callErr, errdefs.ErrNotFound) {
			// A failed Renew may hide an extension and observed nothing:
			// observe, and let a later pass renew the same allocation.
			keepalive = false
			info, callErr = w.getInfo(ctx, p, ref)
		}
	default:
		info, callErr = w.getInfo(ctx, p, ref)
	}
	end(callErr)
	compute, reason := observed(o.Allocation, info, callErr)
	params := store.RecordObservationParams{
		ID: o.ID, Revision: o.Revision, Compute: compute, Reason: reason,
		Keepalive: keepalive && compute == store.ObservedRunning,
	}
	if restored && compute == store.ObservedRunning && !o.RuntimeConnected {
		// Restored and running, and its Runtime not connected: the wake
		// after the restore may have been lost. Waking is idempotent (a
		// Runtime that is not parked is not signalled).
		if c, err := o.Compute(cp.Initial); err == nil {
			w.wakeRuntime(ctx, cp, o.Allocation, c)
		}
	}
	if compute == store.ObservedRunning && !params.Keepalive &&
		o.Observation.Compute == store.ObservedRunning && o.Observation.Reason == reason {
		return true, nil
	}
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	_, err = w.store.RecordObservation(rctx, params)
	if err == nil && compute != o.Observation.Compute {
		w.log.Info("lifecycle observed compute", "allocation", o.ID, "reason", reason)
	}
	return false, err
}

// getCompute observes a's current incarnation (GetCompute) as an Info of
// its Reference with the incarnation's native id.
func (w *observer) getCompute(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation) (sandbox.Info, error) {
	c, err := a.Compute(cp.Initial)
	if err != nil {
		return sandbox.Info{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	ci, err := cp.GetCompute(callCtx, c)
	if err != nil {
		return sandbox.Info{}, err
	}
	if ci.Compute.Reference != c.Reference || ci.Compute.Name != c.Name || ci.Compute.Generation != c.Generation {
		return sandbox.Info{}, errdefs.ErrObservationUnavailable
	}
	state := map[sandbox.ComputeState]sandbox.State{
		sandbox.ComputeRunning: sandbox.StateRunning, sandbox.ComputePaused: sandbox.StatePaused,
		sandbox.ComputeStopped: sandbox.StateStopped, sandbox.ComputeAbsent: sandbox.StateAbsent,
	}[ci.State]
	if state == "" {
		return sandbox.Info{}, errdefs.ErrObservationUnavailable
	}
	return sandbox.Info{Reference: c.Reference, ProviderID: ci.Compute.ID, State: state}, nil
}

func (w *observer) getInfo(ctx context.Context, p sandbox.SandboxProvider, ref sandbox.Reference) (sandbox.Info, error) {
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	return p.GetInfo(callCtx, ref)
}

// observed classifies one observation of a's running compute. ErrNotFound
// is a missing observation and any other error an unavailable one: never
// proof of absence, never a reason to clean up. An unavailable one caused
// by a refusal (errdefs.Refusal: Core refused to call the node, as for a
// node back on another backend) keeps the refusal's fixed reason, so the
// Session API names it; the node protocol carries no refusals, so such a
// reason is always Core's own. Running needs the matching Reference and
// the native identity the Create settled with.
func observed(a store.Allocation, info sandbox.Info, err error) (store.ObservedCompute, string) {
	ref := a.Reference()
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return store.ObservedMissing, ReasonMissing
	case err != nil:
		if r, ok := errdefs.AsRefusal(err); ok {
			return store.ObservedUnavailable, r.Reason
		}
		return store.ObservedUnavailable, ReasonUnavailable
	case info == (sandbox.Info{}), info.CheckFor(ref) != nil:
		return store.ObservedUnavailable, ReasonUnavailable
	case info.State == sandbox.StateAbsent:
		return store.ObservedMissing, ReasonMissing
	case info.ProviderID != "" && a.NativeID() != "" && info.ProviderID != a.NativeID():
		return store.ObservedMissing, ReasonReplaced
	case info.State == sandbox.StateRunning && info.ProviderID != "":
		return store.ObservedRunning, ReasonRunning
	case info.State == sandbox.StatePaused:
		return store.ObservedStopped, ReasonPaused
	}
	return store.ObservedStopped, ReasonStopped
}
