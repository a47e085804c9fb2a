package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

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
	// Compute found running again, as last recorded, is recorded for the
	// whole page at its end, in one transaction (store.RecordObservations):
	// that is nearly every observation, and one transaction per page
	// instead of one per allocation is what keeps the scan up with many
	// running allocations. Anything else (a change, a stop, a missing or
	// unavailable observation, a keepalive) is recorded at once, on its
	// own, as before: the Turn sweep and the Session API act on it.
	var batch []pendingRecord
	defer func() { w.recordBatch(ctx, batch) }()
	return scan(ctx, &w.after, page, func(o store.Observable) uuid.UUID { return o.ID }, func(o store.Observable) error {
		rec, err := w.observeRunning(ctx, p, o, unreachable)
		if rec != nil {
			batch = append(batch, *rec)
		}
		if errors.Is(err, errdefs.ErrFenced) && !errors.Is(err, store.ErrSuperseded) {
			return nil // fenced: cleanup or another transition won
		}
		return w.passOn(err, "lifecycle observe", "allocation", o.ID)
	})
}

// pendingRecord is an observation of compute running as last recorded,
// waiting for the page's one transaction.
type pendingRecord struct {
	params store.RecordObservationParams
}

// recordBatch records the page's unchanged running observations in one
// transaction (detached from ctx's cancellation, like every record of a
// provider outcome, and bounded).
func (w *observer) recordBatch(ctx context.Context, batch []pendingRecord) {
	if len(batch) == 0 {
		return
	}
	ps := make([]store.RecordObservationParams, len(batch))
	for i, b := range batch {
		ps[i] = b.params
	}
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	errs, err := w.store.RecordObservations(rctx, ps)
	if err != nil {
		if !errors.Is(err, store.ErrSuperseded) {
			w.log.Warn("lifecycle observe", "allocations", len(ps), "error", err)
		}
		return
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, errdefs.ErrFenced) {
			w.log.Warn("lifecycle observe", "allocation", ps[i].ID, "error", err)
		}
	}
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

// observeRunning observes o when due. Compute found running as last
// recorded, with no keepalive to confirm, is returned for the page's
// batch instead of recorded here; everything else is recorded at once.
func (w *observer) observeRunning(ctx context.Context, p sandbox.SandboxProvider, o store.Observable, unreachable error) (*pendingRecord, error) {
	keepalive := p != nil && keepaliveWanted(o, w.node == DirectLane)
	if !keepalive && !o.ObservationDue {
		return nil, nil
	}
	ref := o.Reference()
	var (
		info    sandbox.Info
		callErr error
	)
	cp := checkpointer(p)
	restored := o.ComputeName != ""
	end := func(error) {}
	if p != nil && (!restored || cp != nil) {
		op := opObserve
		if keepalive {
			op = opKeepalive
		}
		ctx, end = w.tel.operation(ctx, op, w.node, o.ID)
	}
	switch {
	case p == nil:
		callErr = unreachable
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
		return &pendingRecord{params: params}, nil
	}
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	_, err := w.store.RecordObservation(rctx, params)
	if err == nil && compute != o.Observation.Compute {
		w.log.Info("lifecycle observed compute", "allocation", o.ID, "reason", reason)
	}
	return nil, err
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
