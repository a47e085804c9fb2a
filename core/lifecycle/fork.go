package lifecycle

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// A fork (store.CreateFork) is the source node's work twice: the Capture
// of a running source, once per receipt (an unknown outcome is only
// observed), and the fork's settlement once every child's Create is
// settled. The children's Creates are the pending scan's, seeded from the
// fork's snapshot (worker.go, create).

// forkStore is what the fork scan reads and writes.
type forkStore interface {
	ListForkWorkForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]store.Fork, error)
	GetAllocation(ctx context.Context, id uuid.UUID) (store.Allocation, error)
	ClaimForkCapture(ctx context.Context, id, op uuid.UUID) (store.Fork, error)
	RecordForkCaptured(ctx context.Context, id, op uuid.UUID, snap sandbox.SnapshotIdentity) (store.Fork, error)
	FailFork(ctx context.Context, id uuid.UUID, code string) (store.Fork, []store.Termination, error)
	FinishFork(ctx context.Context, id uuid.UUID) (store.Fork, error)
	ListSeedWorkForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]store.SeedWork, error)
	ClaimForkSeed(ctx context.Context, fork, node uuid.UUID) (store.ForkSeed, error)
	RecordForkSeedReady(ctx context.Context, fork, node uuid.UUID, snap sandbox.SnapshotIdentity) (store.ForkSeed, error)
	FailForkSeed(ctx context.Context, fork, node uuid.UUID) (store.ForkSeed, []store.Termination, error)
	MarkForkSeedDiscarded(ctx context.Context, fork, node uuid.UUID) (store.ForkSeed, error)
}

// forkScan captures forks' running sources and settles forks, and
// imports and discards the seeds of forks with children on its node
// (seed.go).
type forkScan struct {
	*base
	store     forkStore
	after     uuid.UUID
	seedAfter uuid.UUID
}

func (*forkScan) wanted(w store.NodeWork) bool { return w.Forks || w.Seeds }

// pass runs one page of the node's fork work.
func (w *forkScan) pass(ctx context.Context, p sandbox.SandboxProvider) error {
	cp := checkpointer(p)
	if cp == nil {
		return nil
	}
	page, err := w.store.ListForkWorkForNode(ctx, w.node, w.after, store.NodePageSize)
	if err != nil {
		return err
	}
	if err := scan(ctx, &w.after, page, func(f store.Fork) uuid.UUID { return f.ID }, func(f store.Fork) error {
		return w.passOn(fenced(w.advance(ctx, cp, f)), "lifecycle fork", "fork", f.ID)
	}); err != nil {
		return err
	}
	seeds, err := w.store.ListSeedWorkForNode(ctx, w.node, w.seedAfter, store.NodePageSize)
	if err != nil {
		return err
	}
	return scan(ctx, &w.seedAfter, seeds, func(sw store.SeedWork) uuid.UUID { return sw.Seed.ForkID }, func(sw store.SeedWork) error {
		return w.passOn(fenced(w.seed(ctx, cp, sw)), "lifecycle fork seed", "fork", sw.Seed.ForkID)
	})
}

// advance settles a ready fork, or claims and sends (or observes) a
// capturing fork's Capture and records what it found.
func (w *forkScan) advance(ctx context.Context, cp sandbox.CheckpointProvider, f store.Fork) error {
	if f.State == store.ForkReady {
		if _, err := w.store.FinishFork(ctx, f.ID); err != nil {
			return err
		}
		w.log.Info("lifecycle fork settled", "fork", f.ID)
		return nil
	}
	a, err := w.store.GetAllocation(ctx, f.SourceAllocationID)
	if err != nil {
		return err
	}
	src, err := a.Compute(cp.Initial)
	if err != nil {
		return err
	}
	op := *f.CaptureOp
	observe := f.CaptureClaimedAt != nil
	if !observe {
		if _, err := w.store.ClaimForkCapture(ctx, f.ID, op); err != nil {
			return err // fenced: the source ended and the fork failed, or another claim won
		}
	}
	name := opCapture
	if observe {
		name = opCaptureObserve
	}
	ctx, end := w.tel.operation(ctx, name, w.node, a.ID)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	res, callErr := cp.Capture(callCtx, sandbox.CaptureRequest{Compute: src, OperationID: op.String(), ObserveOnly: observe})
	cancel()
	end(callErr)
	if callErr != nil && !observe && !definite(callErr) {
		// Unknown: the next pass observes the operation, never repeats it.
		w.log.InfoContext(ctx, "lifecycle fork capture unconfirmed", "fork", f.ID, "error", callErr)
		return nil
	}
	return w.settleCapture(ctx, cp, f, src, res, callErr)
}

// definite reports whether a Capture's error says nothing ran: the
// declaration's or an old node agent's unsupported answer, or an invalid
// request refused before any native call.
func definite(err error) bool {
	_, unsupported := providercontract.AsUnsupported(err, sandbox.OpCapture)
	return unsupported || errors.Is(err, errdefs.ErrInvalid)
}

// settleCapture records a fork's Capture (or its observation): the
// snapshot makes the fork ready; a definite absence (the provider read
// that the operation made no snapshot) or a definite refusal thaws the
// source when a pause may have outlived the attempt and fails the fork,
// ending its children not yet created; anything else observed nothing
// and is observed again.
func (w *forkScan) settleCapture(ctx context.Context, cp sandbox.CheckpointProvider, f store.Fork, src sandbox.Compute,
	res sandbox.CaptureResult, callErr error,
) error {
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	switch {
	case callErr == nil && res.Snapshot.ID != "":
		if _, err := w.store.RecordForkCaptured(rctx, f.ID, *f.CaptureOp, res.Snapshot); err != nil {
			return err
		}
		w.log.Info("lifecycle fork captured", "fork", f.ID, "source", f.SourceAllocationID)
		return nil
	case errors.Is(callErr, errdefs.ErrNotFound):
		if _, err := thaw(ctx, w.cfg.CallTimeout, cp, src); err != nil {
			return err
		}
	case callErr != nil && definite(callErr):
	default:
		return callErr // no observation: observe again on the next pass
	}
	_, terms, err := w.store.FailFork(rctx, f.ID, store.ForkFailureCapture)
	if err == nil {
		w.log.Info("lifecycle fork capture failed", "fork", f.ID, "children_ended", len(terms))
	}
	return err
}
