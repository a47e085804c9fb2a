package lifecycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/lifecycle"
	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// batching is the counted Docker adapter with the batched read Core's node
// proxy offers (GetInfoBatch): each target is the adapter's own GetInfo,
// as the node agent does it, unless fail answers the whole call.
type batching struct {
	*counting
	mu    sync.Mutex
	calls [][]string
	fail  error
}

func (b *batching) GetInfoBatch(ctx context.Context, refs []sandbox.Reference) ([]sandbox.Info, []error, error) {
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.AllocationID
	}
	b.mu.Lock()
	b.calls = append(b.calls, ids)
	fail := b.fail
	b.mu.Unlock()
	if fail != nil {
		return nil, nil, fail
	}
	infos, errs := make([]sandbox.Info, len(refs)), make([]error, len(refs))
	for i, r := range refs {
		infos[i], errs[i] = b.counting.GetInfo(ctx, r)
	}
	return infos, errs, nil
}

func (b *batching) batches() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]string(nil), b.calls...)
}

// batchObserving is observing with a batching provider and three running
// Sessions, all observed running once.
func batchObserving(t *testing.T) (*env, *node, *batching, *lifecycle.Worker, []store.SessionBundle) {
	t.Helper()
	e, n, c, _ := observing(t, 8, 10*time.Second, time.Hour)
	b := &batching{counting: c}
	e.cfg.Provider = func(uuid.UUID) (sandbox.SandboxProvider, error) { return b, nil }
	w := lifecycle.NewWorker(e.cfg, n.id)
	var bundles []store.SessionBundle
	for range 3 {
		bundles = append(bundles, e.createBundle(t, n.id))
	}
	for range 4 {
		pass(t, w)
	}
	for _, bb := range bundles {
		e.wantObserved(t, bb, store.ObservedRunning, lifecycle.ReasonRunning)
	}
	return e, n, b, w, bundles
}

// age makes every observation of the node a minute old and drops its
// marks, so that the next pass observes all of them.
func (e *env) age(t *testing.T) {
	t.Helper()
	_, err := e.st.Pool().Exec(context.Background(), `UPDATE allocations SET observed_at = now() - interval '1 minute' WHERE observed_at IS NOT NULL`)
	must(t, err)
	_, err = e.st.Pool().Exec(context.Background(), `DELETE FROM observation_marks`)
	must(t, err)
}

// TestPageIsObservedInOneBatchAndUnchangedRowsAreMarkedNotWritten: a
// page's due observations are one batched call; running compute found as
// recorded writes no allocation row but one mark, which makes the rows
// not due; a change is written on the row at once.
func TestPageIsObservedInOneBatchAndUnchangedRowsAreMarkedNotWritten(t *testing.T) {
	e, n, b, w, bundles := batchObserving(t)
	e.age(t)
	before := map[uuid.UUID]store.Allocation{}
	for _, bb := range bundles {
		before[bb.Allocation.ID] = e.alloc(t, bb.Allocation.ID)
	}
	calls := len(b.batches())
	pass(t, w)
	got := b.batches()[calls:]
	if len(got) != 1 || len(got[0]) != 3 {
		t.Fatalf("batched calls of the pass %v, want one of 3 targets", got)
	}
	for _, bb := range bundles {
		a := e.alloc(t, bb.Allocation.ID)
		if !a.Observation.At.Equal(*before[a.ID].Observation.At) || a.Revision != before[a.ID].Revision {
			t.Fatalf("unchanged running compute was written: %v -> %v", before[a.ID].Observation.At, a.Observation.At)
		}
	}
	var marks, listed int
	must(t, e.st.Pool().QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(cardinality(ids)), 0) FROM observation_marks WHERE lane = $1`, n.id).Scan(&marks, &listed))
	if marks != 1 || listed != 3 {
		t.Fatalf("%d marks listing %d ids, want 1 listing 3", marks, listed)
	}
	// The mark counts: the next pass observes nothing.
	pass(t, w)
	if k := len(b.batches()); k != calls+1 {
		t.Fatalf("%d batched calls after the marked pass, want %d", k, calls+1)
	}

	// A stopped container is a change: written on its row at once.
	name := n.p.Name(bundles[1].Allocation.Reference())
	if !n.srv.SetContainerState(name, dockertest.StateExited) {
		t.Fatal("no container")
	}
	e.age(t)
	pass(t, w)
	e.wantObserved(t, bundles[1], store.ObservedStopped, lifecycle.ReasonStopped)
	e.wantObserved(t, bundles[0], store.ObservedRunning, lifecycle.ReasonRunning)
	must(t, e.st.Pool().QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(cardinality(ids)), 0) FROM observation_marks WHERE lane = $1`, n.id).Scan(&marks, &listed))
	if marks != 1 || listed != 2 {
		t.Fatalf("%d marks listing %d ids after a stop, want 1 listing the 2 running", marks, listed)
	}
}

// TestOnlyUnsupportedBatchFallsBackToPerTargetReads: the typed
// unsupported error for ObserveBatch makes the page's reads per target;
// an unavailable or not-found answer for the call makes none and records
// every target unavailable, never missing.
func TestOnlyUnsupportedBatchFallsBackToPerTargetReads(t *testing.T) {
	e, _, b, w, bundles := batchObserving(t)
	ids := func() []uuid.UUID {
		out := make([]uuid.UUID, len(bundles))
		for i, bb := range bundles {
			out[i] = bb.Allocation.ID
		}
		return out
	}()
	reads := func() int {
		k := 0
		for _, id := range ids {
			g, _ := b.counts(id)
			k += g
		}
		return k
	}

	b.fail = &providercontract.UnsupportedError{Operation: sandbox.OpObserveBatch, Code: "node_does_not_batch"}
	e.age(t)
	b.reset()
	pass(t, w)
	if k := reads(); k != 3 {
		t.Fatalf("%d per-target reads after an unsupported batch, want 3", k)
	}
	for _, bb := range bundles {
		e.wantObserved(t, bb, store.ObservedRunning, lifecycle.ReasonRunning)
	}

	for _, fail := range []error{errdefs.ErrObservationUnavailable, errdefs.ErrNotFound,
		&providercontract.UnsupportedError{Operation: sandbox.OpGetInfo, Code: "not_this_one"}} {
		b.fail = fail
		e.age(t)
		b.reset()
		pass(t, w)
		if k := reads(); k != 0 {
			t.Fatalf("%v: %d per-target reads, want none", fail, k)
		}
		for _, bb := range bundles {
			e.wantObserved(t, bb, store.ObservedUnavailable, lifecycle.ReasonUnavailable)
		}
		b.fail = nil
		e.age(t)
		pass(t, w)
		for _, bb := range bundles {
			e.wantObserved(t, bb, store.ObservedRunning, lifecycle.ReasonRunning)
		}
	}
}
