package lifecycle

import (
	"context"
	"errors"
	"io"

	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// A fork's children on a node other than the source's are created from
// that node's seed: the fork's snapshot, exported by the source node's
// adapter and imported by this node's, relayed through Core by this
// node's worker (the one pipe below; one chunk in hand each way). An
// import is idempotent by its operation, so an attempt of unknown outcome
// is simply made again, at most store.MaxSeedAttempts times; a seed of an
// ended fork is discarded.

// seed imports or discards one seed of this node.
func (w *forkScan) seed(ctx context.Context, cp sandbox.CheckpointProvider, sw store.SeedWork) error {
	s := sw.Seed
	src, err := w.store.GetAllocation(ctx, sw.SourceAllocationID)
	if err != nil {
		return err
	}
	owner := src.Reference()
	via, err := w.store.GetAllocation(ctx, sw.ViaAllocationID)
	if err != nil {
		return err
	}
	if sw.ForkState != store.ForkReady {
		callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		_, err := cp.ImportSnapshot(callCtx, sandbox.ImportRequest{Owner: owner, OperationID: s.Operation.String(), Discard: true,
			Via: via.Reference()}, nil)
		cancel()
		if err != nil {
			return err
		}
		_, err = w.store.MarkForkSeedDiscarded(ctx, s.ForkID, s.NodeID)
		return err
	}
	// The source's node first: one Core cannot reach spends no attempt.
	p, err := w.cfg.Provider(sw.SourceNodeID)
	if err != nil {
		return err
	}
	source := checkpointer(p)
	if source == nil {
		return errdefs.ErrContract
	}
	if _, err := w.store.ClaimForkSeed(ctx, s.ForkID, s.NodeID); err != nil {
		return err // fenced: its attempts ran out and it failed, or the fork moved on
	}
	snap, err := w.importSeed(ctx, source, cp, sw, owner, via.Reference())
	rctx, rcancel := recordContext(ctx)
	defer rcancel()
	switch {
	case err == nil:
		if _, err := w.store.RecordForkSeedReady(rctx, s.ForkID, s.NodeID, snap); err != nil {
			return err
		}
		w.log.Info("lifecycle fork seed imported", "fork", s.ForkID)
		return nil
	case definiteSeed(err):
		_, terms, err := w.store.FailForkSeed(rctx, s.ForkID, s.NodeID)
		if err == nil {
			w.log.Info("lifecycle fork seed failed", "fork", s.ForkID, "children_ended", len(terms))
		}
		return err
	}
	// Unknown or cut short: the next pass imports again under the same
	// operation, which completes or redoes it.
	w.log.InfoContext(ctx, "lifecycle fork seed unconfirmed", "fork", s.ForkID, "error", err)
	return nil
}

// importSeed relays the fork's snapshot from the source's node (src) into
// this node's import (cp), as one pipe: the export writes what the import
// reads.
func (w *forkScan) importSeed(ctx context.Context, src, cp sandbox.CheckpointProvider, sw store.SeedWork, owner, via sandbox.Reference) (sandbox.SnapshotIdentity, error) {
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	exported := make(chan error, 1)
	go func() {
		err := src.ExportSnapshot(callCtx, owner, sw.Snapshot, pw)
		_ = pw.CloseWithError(err)
		exported <- err
	}()
	snap, err := cp.ImportSnapshot(callCtx, sandbox.ImportRequest{Owner: owner, OperationID: sw.Seed.Operation.String(), Via: via}, pr)
	_ = pr.CloseWithError(errImportEnded)
	cancel()
	// The export's own failure is the cause of an import that read a cut
	// archive; an export stopped because the import ended is not.
	if xerr := <-exported; xerr != nil && !errors.Is(xerr, errImportEnded) && !errors.Is(xerr, context.Canceled) {
		return sandbox.SnapshotIdentity{}, xerr
	}
	return snap, err
}

// errImportEnded ends the relay's pipe once the import returned.
var errImportEnded = errors.New("the import ended")

// definiteSeed reports whether a seed's failure says it can never be
// imported: either side's unsupported answer, the source's snapshot gone
// (ErrNotFound) or not the owner's, or an invalid request.
func definiteSeed(err error) bool {
	_, noExport := providercontract.AsUnsupported(err, sandbox.OpExportSnapshot)
	_, noImport := providercontract.AsUnsupported(err, sandbox.OpImportSnapshot)
	return noExport || noImport || errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrOwnership) ||
		errors.Is(err, errdefs.ErrInvalid) && !errors.Is(err, errdefs.ErrComputeUnconfirmed)
}
