package runtimeobs_test

import (
	"context"
	"slices"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refadapter"
	"berth.dev/sandbox/internal/refnative"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/runtimeobs"
)

const installation = "inst-1"

func setup(t *testing.T) (*refnative.Server, *refadapter.Provider, []sandbox.Reference) {
	srv := refnative.Start(t)
	p := refadapter.New(srv.URL, installation, refadapter.NewClient())
	var refs []sandbox.Reference
	for range 3 {
		ref := contracttest.NewReference()
		if _, err := p.Create(context.Background(), contracttest.CreateRequest(ref, sandbox.Resources{})); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	srv.ResetCalls()
	return srv, p, refs
}

func TestObserveAllFallsBackOnlyOnTypedUnsupported(t *testing.T) {
	srv, p, refs := setup(t)
	missing := contracttest.NewReference()
	targets := []sandbox.Reference{refs[0], missing, refs[2]}
	results, err := runtimeobs.ObserveAll(context.Background(), p, targets)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("got %d results", len(results))
	}
	for i, want := range []bool{true, false, true} {
		if ok := results[i].Err == nil; ok != want {
			t.Errorf("result %d: err = %v", i, results[i].Err)
		}
		if want && results[i].Observation.Reference != targets[i] {
			t.Errorf("result %d out of order", i)
		}
	}
	if !errdefs.IsNotFound(results[1].Err) {
		t.Errorf("missing target: %v", results[1].Err)
	}
	if n := count(srv.Calls(), refnative.CallStats); n != 2 {
		t.Errorf("stats calls = %d, want 2 (per-target fallback)", n)
	}
}

// batchFails wraps the reference adapter with a batch read that fails with
// err.
type batchFails struct {
	*refadapter.Provider
	err error
}

func (b batchFails) ObserveBatch(context.Context, []sandbox.Reference) ([]sandbox.ObservationResult, error) {
	return nil, b.err
}

// batchShort answers a batch with one result too few.
type batchShort struct{ *refadapter.Provider }

func (b batchShort) ObserveBatch(_ context.Context, refs []sandbox.Reference) ([]sandbox.ObservationResult, error) {
	return make([]sandbox.ObservationResult, len(refs)-1), nil
}

func TestObserveAllNeverFallsBackOnOtherFailures(t *testing.T) {
	for name, err := range map[string]error{
		"unavailable":              errdefs.ErrObservationUnavailable,
		"deadline":                 context.DeadlineExceeded,
		"bare ErrUnsupported":      errdefs.ErrUnsupported,
		"unsupported for other op": &providercontract.UnsupportedError{Operation: sandbox.OpObserve, Code: "no_observe"},
	} {
		t.Run(name, func(t *testing.T) {
			srv, p, refs := setup(t)
			if _, got := runtimeobs.ObserveAll(context.Background(), batchFails{p, err}, refs); got == nil {
				t.Fatal("no error")
			}
			if calls := srv.Calls(); len(calls) != 0 {
				t.Fatalf("fell back to per-target calls: %v", calls)
			}
		})
	}
	_, p, refs := setup(t)
	if _, err := runtimeobs.ObserveAll(context.Background(), batchShort{p}, refs); providercontract.CodeOf(err) != providercontract.CodeBatchResult {
		t.Errorf("short batch: %v", err)
	}
	if _, err := runtimeobs.ObserveAll(context.Background(), p, make([]sandbox.Reference, runtimeobs.MaxBatch+1)); !errdefs.IsInvalid(err) {
		t.Errorf("oversized batch: %v", err)
	}
}

func count(calls []string, name string) int {
	return len(slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return c != name }))
}
