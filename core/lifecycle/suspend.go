package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/secrets"
	"berth.dev/core/store"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// Defaults of the suspension cycle.
const (
	// DefaultQuiesceTimeout is how long an armed suspension waits for the
	// Runtime's acknowledgement before it is aborted. A connected Runtime
	// answers within a round trip; a minute covers a reconnection.
	DefaultQuiesceTimeout = time.Minute
	// DefaultRestoreAbandonAfter is how long a restore's outcome may stay
	// unknown, with the attempt's incarnation observed not running,
	// before it is abandoned (observeRestore says when it may be).
	DefaultRestoreAbandonAfter = time.Minute
)

// checkpointer returns p's checkpoint operations, or nil.
func checkpointer(p sandbox.SandboxProvider) sandbox.CheckpointProvider {
	cp, _ := p.(sandbox.CheckpointProvider)
	return cp
}

// pass runs one page of the node's allocations in a suspension phase.
func (w *suspensionScan) pass(ctx context.Context, p sandbox.SandboxProvider) error {
	cp := checkpointer(p)
	if cp == nil {
		return nil
	}
	work, err := w.store.ListSuspensionWorkForNode(ctx, store.SuspensionWorkScan{
		NodeID: w.node, After: w.after, Limit: store.NodePageSize,
		QuiesceTimeout: w.cfg.QuiesceTimeout, RestoreTimeout: w.cfg.RestoreAbandonAfter,
	})
	if err != nil {
		return err
	}
	return scan(ctx, &w.after, work, func(sw store.SuspensionWork) uuid.UUID { return sw.ID }, func(sw store.SuspensionWork) error {
		return w.passOn(fenced(w.advance(ctx, cp, sw)), "lifecycle suspension", "allocation", sw.ID)
	})
}

// pass runs one page of the node's suspension candidates.
func (w *candidateScan) pass(ctx context.Context, p sandbox.SandboxProvider) error {
	if checkpointer(p) == nil {
		return nil
	}
	candidates, err := w.store.ListSuspensionCandidatesForNode(ctx, store.SuspensionScan{
		NodeID: w.node, After: w.after, Limit: store.NodePageSize,
	})
	if err != nil {
		return err
	}
	return scan(ctx, &w.after, candidates, func(c store.SuspensionCandidate) uuid.UUID { return c.ID }, func(c store.SuspensionCandidate) error {
		return w.passOn(fenced(w.arm(ctx, c.Allocation)), "lifecycle arm suspension", "allocation", c.ID)
	})
}

// pass runs one page of the node's allocations owing leftovers.
func (w *leftoverScan) pass(ctx context.Context, p sandbox.SandboxProvider) error {
	cp := checkpointer(p)
	if cp == nil {
		return nil
	}
	owing, err := w.store.ListAllocationsOwingLeftovers(ctx, w.node, w.after, store.NodePageSize)
	if err != nil {
		return err
	}
	return scan(ctx, &w.after, owing, func(id uuid.UUID) uuid.UUID { return id }, func(id uuid.UUID) error {
		return w.passOn(fenced(w.deleteLeftovers(ctx, cp, id)), "lifecycle leftovers", "allocation", id)
	})
}

// fenced drops a fenced compare-and-swap (another transition won) that
// is not a superseded owner: the next pass reads the new state.
func fenced(err error) error {
	if errors.Is(err, errdefs.ErrFenced) && !errors.Is(err, store.ErrSuperseded) {
		return nil
	}
	return err
}

// arm arms the suspension of idle candidate a.
func (w *candidateScan) arm(ctx context.Context, a store.Allocation) error {
	_, err := w.susp.Arm(ctx, a, w.cfg.NewID())
	if errors.Is(err, store.ErrNoRoom) {
		return nil // the node keeps max_retained snapshots: the Session keeps running
	}
	if err != nil {
		return err
	}
	w.log.Info("lifecycle suspension armed", "allocation", a.ID)
	return nil
}

// advance moves one allocation of the suspension cycle on.
func (w *suspensionScan) advance(ctx context.Context, cp sandbox.CheckpointProvider, sw store.SuspensionWork) error {
	a := sw.Allocation
	switch a.ComputePhase {
	case store.PhaseQuiescing:
		op := *a.Suspension.Operation
		switch {
		case sw.WorkWaiting, a.Suspension.AckedAt == nil && sw.QuiesceOverdue:
			_, err := w.susp.Abort(ctx, a, op)
			if err == nil {
				w.log.Info("lifecycle suspension aborted", "allocation", a.ID, "work_waiting", sw.WorkWaiting)
			}
			return err
		case a.Suspension.AckedAt != nil:
			return w.capture(ctx, cp, a, op)
		}
		return nil
	case store.PhaseSuspending:
		return w.observeCapture(ctx, cp, a)
	case store.PhaseSuspended:
		switch {
		case sw.RetentionExpired:
			return w.expire(ctx, a)
		case sw.WorkWaiting:
			return w.restore(ctx, cp, a)
		}
		return nil
	case store.PhaseRestoring:
		if sw.RetentionExpired {
			// Expiry wins over a wake up to the restore's final write: a
			// restore not recorded by the deadline is never recorded.
			return w.expire(ctx, a)
		}
		if a.Suspension.RestoreSentAt == nil {
			// Armed, never claimed (a pass ended between the two): the
			// receipt is fresh.
			return w.resume(ctx, cp, a)
		}
		return w.observeRestore(ctx, cp, a, sw.RestoreOverdue)
	}
	return nil
}

// expire ends allocation a, suspended or restoring past its snapshot's
// retention deadline (store.ExpireRetention).
func (w *suspensionScan) expire(ctx context.Context, a store.Allocation) error {
	term, err := w.susp.Expire(ctx, a)
	if err == nil {
		w.log.Info("lifecycle snapshot retention expired", "allocation", a.ID,
			"phase", a.ComputePhase, "settled_turns", len(term.SettledTurns))
	}
	return err
}

// capture consumes the capture receipt of the acknowledged suspension op
// and sends the one Suspend, then settles what it returned.
func (w *suspensionScan) capture(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation, op uuid.UUID) error {
	src, err := a.Compute(cp.Initial)
	if err != nil {
		return err
	}
	claimed, err := w.susp.BeginCapture(ctx, a, op)
	if err != nil {
		return err
	}
	ctx, end := w.tel.operation(ctx, opCapture, w.node, a.ID)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	res, callErr := cp.Suspend(callCtx, sandbox.SuspendRequest{Compute: src, OperationID: op.String()})
	cancel()
	end(callErr)
	if callErr != nil {
		// Unknown: the next pass observes the operation, never repeats it.
		w.log.InfoContext(ctx, "lifecycle capture unconfirmed", "allocation", a.ID, "error", callErr)
		return nil
	}
	return w.settleCapture(ctx, cp, claimed, src, op, res, nil)
}

// observeCapture observes the capture of a suspending allocation (its
// receipt spent) and settles it.
func (w *suspensionScan) observeCapture(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation) error {
	src, err := a.Compute(cp.Initial)
	if err != nil {
		return err
	}
	op := *a.Suspension.Operation
	ctx, end := w.tel.operation(ctx, opCaptureObserve, w.node, a.ID)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	res, callErr := cp.Suspend(callCtx, sandbox.SuspendRequest{Compute: src, OperationID: op.String(), ObserveOnly: true})
	cancel()
	end(callErr)
	return w.settleCapture(ctx, cp, a, src, op, res, callErr)
}

// settleCapture records what a capture (or its observation) found.
func (w *suspensionScan) settleCapture(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation, src sandbox.Compute,
	op uuid.UUID, res sandbox.SuspendResult, callErr error,
) error {
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	switch {
	case callErr == nil && res.Snapshot.ID != "" && res.Source.State == sandbox.ComputeRunning:
		// The source runs again (a rollback overtook the capture): it stays,
		// and the snapshot is owed to cleanup.
		_, err := w.susp.RolledBack(rctx, a, op, "", &res.Snapshot)
		return err
	case callErr == nil && res.Snapshot.ID != "":
		if res.Source.State != sandbox.ComputeAbsent {
			// Complete, with the source still there (observed mid-way): its
			// teardown must be confirmed before the active slot is freed.
			callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
			err := cp.KillCompute(callCtx, src)
			cancel()
			if err != nil {
				return err
			}
		}
		_, err := w.susp.Captured(rctx, a, op, res.Snapshot)
		if err == nil {
			w.log.Info("lifecycle suspended", "allocation", a.ID)
		}
		return err
	case errors.Is(callErr, errdefs.ErrNotFound):
		// The provider read that the operation has no complete snapshot
		// (nothing made, or an incomplete capture that is never
		// repeated): thaw the paused source and run on. A snapshot the
		// provider named is owed to cleanup; an unnamed one (no error
		// result crosses the node protocol) is the allocation's, and its
		// Kill removes it. Only this definite answer rolls back: any other
		// error (ErrComputeUnconfirmed included, which is what a transport
		// failure of the observation is) observed nothing, and a snapshot
		// that did complete would be left unrecorded and outside
		// max_retained.
		id, err := thaw(ctx, w.cfg.CallTimeout, cp, src)
		if err != nil {
			return err
		}
		var left *sandbox.SnapshotIdentity
		if res.Snapshot.ID != "" {
			left = &res.Snapshot
		}
		_, err = w.susp.RolledBack(rctx, a, op, id, left)
		if err == nil {
			w.log.Info("lifecycle capture rolled back", "allocation", a.ID)
		}
		return err
	}
	return callErr // no observation: observe again on the next pass
}

// thaw makes src run again after a capture that did not complete: a
// paused source is resumed (ResumeCompute only thaws, never cold-starts);
// a running one is left alone. It returns the source's native id.
func thaw(ctx context.Context, timeout time.Duration, cp sandbox.CheckpointProvider, src sandbox.Compute) (string, error) {
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := cp.GetCompute(callCtx, src)
	if err != nil {
		return "", err
	}
	if info.State == sandbox.ComputePaused {
		if info, err = cp.ResumeCompute(callCtx, src); err != nil {
			return "", err
		}
	}
	if info.State != sandbox.ComputeRunning {
		return "", errors.New("the source of an incomplete capture is not running")
	}
	return info.Compute.ID, nil
}

// restore arms and performs the restore of suspended allocation a.
func (w *suspensionScan) restore(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation) error {
	prev, err := a.Compute(cp.Initial)
	if err != nil {
		return err
	}
	target, err := cp.NewCompute(prev)
	if err != nil {
		return err
	}
	armed, err := w.susp.PrepareRestore(ctx, a, w.cfg.NewID(), target)
	if errors.Is(err, store.ErrNoRoom) || errors.Is(err, store.ErrProviderDisabled) || errors.Is(err, store.ErrTargetOwed) ||
		errors.Is(err, store.ErrDeploymentResetting) {
		// No active slot on the node, the provider disabled, a deployment
		// reset, or an abandoned target not yet confirmed absent: the work
		// waits.
		return nil
	}
	if err != nil {
		return err
	}
	return w.resume(ctx, cp, armed)
}

// resume consumes the restore receipt of restoring allocation a and sends
// the one Resume, then records a confirmed running target.
func (w *suspensionScan) resume(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation) error {
	target, err := a.Compute(cp.Initial)
	if err != nil {
		return err
	}
	gen, err := w.store.GetGeneration(ctx, uint64(a.Generation))
	if err != nil {
		return err
	}
	bootstrap, err := w.bootstrap(ctx, w.store, a)
	if err != nil {
		return err
	}
	op := *a.Suspension.RestoreOperation
	req := sandbox.ResumeRequest{Snapshot: a.Suspension.Snapshot, Target: target, OperationID: op.String(),
		Resources: gen.Specification.Resources, Bootstrap: bootstrap, CoreCA: w.cfg.RuntimeCA}
	if _, err := w.susp.BeginRestore(ctx, a, op); err != nil {
		if errors.Is(err, store.ErrProviderDisabled) || errors.Is(err, store.ErrDeploymentResetting) {
			return nil // the receipt stays fresh: the restore waits for the provider
		}
		return err
	}
	ctx, end := w.tel.operation(ctx, opRestore, w.node, a.ID)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	res, callErr := cp.Resume(callCtx, req)
	cancel()
	end(callErr)
	if callErr != nil {
		w.log.InfoContext(ctx, "lifecycle restore unconfirmed", "allocation", a.ID, "error", callErr)
		return nil
	}
	return w.settleRestore(ctx, cp, a, op, res.Compute)
}

// bootstrap builds a's Runtime bootstrap file from its sealed credential,
// for its Create and for every restore (the same device and credential:
// a restored Runtime authenticates as the Create's did). The credential
// never reaches a log or an error.
func (w *base) bootstrap(ctx context.Context, creds credentialStore, a store.Allocation) (runtimebootstrap.File, error) {
	sealed, err := creds.GetAllocationCredential(ctx, a.ID)
	if err != nil {
		return runtimebootstrap.File{}, err
	}
	raw, err := w.cfg.Key.Open(sealed.Nonce, sealed.Ciphertext, secrets.DeviceCredential(w.cfg.Installation.ID, a.ID))
	if err != nil {
		return runtimebootstrap.File{}, errors.New("open device credential failed")
	}
	return runtimebootstrap.File{
		Version: runtimebootstrap.Version, CoreURL: w.cfg.Installation.PublicURL,
		DeviceID: a.DeviceID.String(), Credential: runtimebootstrap.NewSecret(string(raw)),
	}, nil
}

// observeRestore observes a dispatched restore of unknown outcome
// (ObserveOnly). A running target is recorded (settleRestore); the
// target's absence receipt abandons it, owing nothing. An observation
// that failed observed nothing, and one that found no instance of the
// target is only a missing observation: the attempt may still make it, so
// the restore stays unknown and is observed again, never redone; once it
// is overdue (unknown for RestoreAbandonAfter) such an observation makes
// the worker claim the target's name (claimRestoreTarget), whose receipt
// a later observation returns. An observation of the exact instance the
// attempt made (its native id) not running, once overdue, abandons it:
// that instance is owed to cleanup by its id, and the next restore waits
// for its confirmed absence (store.ErrTargetOwed).
func (w *suspensionScan) observeRestore(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation, overdue bool) error {
	target, err := a.Compute(cp.Initial)
	if err != nil {
		return err
	}
	op := *a.Suspension.RestoreOperation
	ctx, end := w.tel.operation(ctx, opRestoreObserve, w.node, a.ID)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	res, callErr := cp.Resume(callCtx, sandbox.ResumeRequest{Snapshot: a.Suspension.Snapshot, Target: target,
		OperationID: op.String(), ObserveOnly: true})
	cancel()
	end(callErr)
	if callErr != nil {
		w.log.InfoContext(ctx, "lifecycle restore still unknown", "allocation", a.ID,
			"not_found", errors.Is(callErr, errdefs.ErrNotFound), "error", callErr)
		if overdue && errors.Is(callErr, errdefs.ErrNotFound) {
			return w.claimRestoreTarget(ctx, cp, a, target)
		}
		return nil
	}
	got := res.Compute
	if got.State == sandbox.ComputeRunning {
		return w.settleRestore(ctx, cp, a, op, got)
	}
	if got.Compute.Name != target.Name || got.Compute.Generation != target.Generation || got.Compute.Reference != target.Reference {
		return errors.New("restore observation named another incarnation than its target")
	}
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	if got.AbsenceReceipt {
		// The target's name is claimed: the attempt can never make it.
		if _, err := w.susp.RestoreAbsent(rctx, a, op); err != nil {
			return err
		}
		w.log.Info("lifecycle restore abandoned on its absence receipt", "allocation", a.ID, "compute_generation", target.Generation)
		return nil
	}
	if !overdue {
		return nil
	}
	if got.Compute.ID == "" || got.State == sandbox.ComputeAbsent {
		return w.claimRestoreTarget(ctx, cp, a, target)
	}
	target.ID = got.Compute.ID
	if _, err := w.susp.RestoreAbandoned(rctx, a, op, target); err != nil {
		return err
	}
	w.log.Info("lifecycle restore abandoned", "allocation", a.ID, "compute_generation", target.Generation)
	return nil
}

// claimRestoreTarget asks the provider to claim the name of target, the
// overdue restore's incarnation that no observation found (KillCompute of
// an incarnation whose instance Core never learned: the Docker adapter
// places a tombstone there, as Kill does for a Create). The claim is
// evidence only once an observation returns it as the target's absence
// receipt; until then the restore stays unknown.
func (w *suspensionScan) claimRestoreTarget(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation, target sandbox.Compute) error {
	target.ID = ""
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	err := cp.KillCompute(callCtx, target)
	cancel()
	if err != nil {
		w.log.InfoContext(ctx, "lifecycle restore target not claimed", "allocation", a.ID, "error", err)
	}
	return nil
}

// settleRestore records a restore confirmed running and wakes its
// Runtime.
func (w *suspensionScan) settleRestore(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation, op uuid.UUID, got sandbox.ComputeInfo) error {
	target, err := a.Compute(cp.Initial)
	if err != nil {
		return err
	}
	if got.State != sandbox.ComputeRunning || got.Compute.ID == "" || got.Compute.Name != target.Name ||
		got.Compute.Generation != target.Generation || got.Compute.Reference != target.Reference {
		return errors.New("restore returned another incarnation than its target")
	}
	rctx, rcancel := recordContext(ctx)
	restored, err := w.susp.Restored(rctx, a, op, got.Compute.ID)
	rcancel()
	if errors.Is(err, errdefs.ErrFenced) && !errors.Is(err, store.ErrSuperseded) {
		// Deletion, device revocation or retention expiry came first: the
		// restore is not recorded and its Runtime never woken. Cleanup
		// (the allocation's Kill, after the deletion or the expiry the next
		// pass records) removes the incarnation.
		w.log.Info("lifecycle restore lost to the Session's end", "allocation", a.ID)
		return nil
	}
	if err != nil {
		return err
	}
	w.log.Info("lifecycle restored", "allocation", a.ID, "compute_generation", target.Generation)
	target.ID = got.Compute.ID
	w.wakeRuntime(ctx, cp, restored, target)
	return nil
}

// wakeRuntime runs the wake command in incarnation c: the parked Runtime (its
// process identity fenced by PID and start time inside the sandbox)
// connects and authenticates again. A failed wake is logged; the
// observation scan repeats it while the Runtime stays disconnected.
func (w *base) wakeRuntime(ctx context.Context, cp sandbox.CheckpointProvider, a store.Allocation, c sandbox.Compute) {
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	res, err := cp.RunCommandCompute(callCtx, c, sandbox.Command{Args: runtimebootstrap.WakeCommand()})
	cancel()
	// WakeNotParked: it woke already, or never parked.
	if err != nil || (res.ExitCode != 0 && res.ExitCode != runtimebootstrap.WakeNotParked) {
		w.log.Info("lifecycle wake not confirmed", "allocation", a.ID, "exit_code", res.ExitCode, "error", err)
	}
}

// deleteLeftovers deletes the owed leftovers of allocation id exactly and
// marks each confirmed.
func (w *leftoverScan) deleteLeftovers(ctx context.Context, cp sandbox.CheckpointProvider, id uuid.UUID) error {
	a, err := w.store.GetAllocation(ctx, id)
	if err != nil {
		return err
	}
	left, err := w.store.ListOwedLeftovers(ctx, a)
	if err != nil {
		return err
	}
	for _, l := range left {
		callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		switch {
		case l.Snapshot != nil:
			err = cp.DeleteSnapshot(callCtx, a.Reference(), *l.Snapshot)
		case l.Compute != nil:
			err = cp.KillCompute(callCtx, *l.Compute)
		}
		cancel()
		if err != nil {
			return err
		}
		if err := w.susp.LeftoverDeleted(ctx, l.ID); err != nil {
			return err
		}
	}
	return nil
}
