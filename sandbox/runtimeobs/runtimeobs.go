package runtimeobs

import (
	"context"
	"fmt"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Source observes one target.
type Source = sandbox.ObservationSource

// BatchSource observes a bounded batch in input order.
type BatchSource = sandbox.BatchObservationSource

// Observation is one reading.
type Observation = sandbox.Observation

// Result is one target's outcome in a batch.
type Result = sandbox.ObservationResult

// MaxBatch bounds one batch.
const MaxBatch = sandbox.MaxObservationBatch

// Observer is a provider that offers both observation operations (every
// adapter implements both and declares each).
type Observer interface {
	Source
	BatchSource
}

// ObserveAll observes refs in input order. It calls ObserveBatch; only the
// typed UnsupportedError for ObserveBatch permits per-target Observe calls.
// An unavailable service, a timeout or any other batch failure is returned
// as it is and never falls back. A batch answer of the wrong length or order
// is a contract violation.
func ObserveAll(ctx context.Context, p Observer, refs []sandbox.Reference) ([]Result, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if len(refs) > MaxBatch {
		return nil, errdefs.Invalid("refs", "batch too large")
	}
	results, err := p.ObserveBatch(ctx, refs)
	if err == nil {
		if len(results) != len(refs) {
			return nil, &providercontract.ContractError{Code: providercontract.CodeBatchResult, Operation: sandbox.OpObserveBatch}
		}
		for i := range results {
			if results[i].Err == nil && results[i].Observation.Reference != refs[i] {
				return nil, &providercontract.ContractError{Code: providercontract.CodeBatchResult, Operation: sandbox.OpObserveBatch}
			}
		}
		return results, nil
	}
	if !sandbox.IsUnsupportedOp(err, sandbox.OpObserveBatch) {
		return nil, fmt.Errorf("observe batch: %w", err)
	}
	results = make([]Result, len(refs))
	for i, ref := range refs {
		obs, err := p.Observe(ctx, ref)
		results[i] = Result{Observation: obs, Err: err}
	}
	return results, nil
}
