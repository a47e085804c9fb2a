package store_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"
)

func TestClaimInstallationOnce(t *testing.T) {
	st, ctx := newStore(t)
	first := newUUID(t)
	got, err := st.ClaimInstallation(ctx, first, "https://core.example:8443")
	must(t, err)
	if got.ID != first || got.PublicURL != "https://core.example:8443" || got.OwnerEpoch != 0 || got.CreatedAt.IsZero() {
		t.Fatalf("first claim = %+v", got)
	}
	again, err := st.ClaimInstallation(ctx, newUUID(t), "https://other.example")
	must(t, err)
	if again != got {
		t.Errorf("second claim = %+v, want the first identity %+v", again, got)
	}
}

func TestClaimInstallationConcurrently(t *testing.T) {
	st, ctx := newStore(t)
	const cores = 8
	ids := make([]uuid.UUID, cores)
	claimed := make([]uuid.UUID, cores)
	errs := make([]error, cores)
	var wg sync.WaitGroup
	for i := range cores {
		ids[i] = newUUID(t)
		wg.Go(func() {
			inst, err := st.ClaimInstallation(ctx, ids[i], "https://core.example")
			claimed[i], errs[i] = inst.ID, err
		})
	}
	wg.Wait()
	for i := range cores {
		must(t, errs[i])
		if claimed[i] != claimed[0] {
			t.Errorf("claim %d got %v, claim 0 got %v", i, claimed[i], claimed[0])
		}
	}
	if !slices.Contains(ids, claimed[0]) {
		t.Errorf("the claimed id %v is none of the ids passed in", claimed[0])
	}
}

func TestClaimInstallationValidates(t *testing.T) {
	st, ctx := newStore(t)
	_, err := st.ClaimInstallation(ctx, uuid.Nil, "https://core.example")
	wantClass(t, err, errdefs.ErrInvalid)
	for _, url := range []string{"", "core.example", "ftp://core.example", "https://core example"} {
		_, err := st.ClaimInstallation(ctx, newUUID(t), url)
		wantClass(t, err, errdefs.ErrInvalid)
	}
	_, err = st.GetInstallation(ctx)
	wantClass(t, err, errdefs.ErrNotFound)
}

func TestNextOwnerEpochConcurrent(t *testing.T) {
	st, ctx := newStore(t)
	_, err := st.NextOwnerEpoch(ctx)
	wantClass(t, err, errdefs.ErrNotFound) // no installation yet

	claim(t, ctx, st, 0)
	const workers, each = 16, 10
	got := make([][]uint64, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				e, err := st.NextOwnerEpoch(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				got[w] = append(got[w], e)
			}
		})
	}
	wg.Wait()
	var all []uint64
	for w := range workers {
		must(t, errs[w])
		if !slices.IsSorted(got[w]) || len(slices.Compact(slices.Clone(got[w]))) != each {
			t.Errorf("worker %d saw epochs %v, want strictly increasing", w, got[w])
		}
		all = append(all, got[w]...)
	}
	slices.Sort(all)
	for i, e := range all {
		if e != uint64(i+1) {
			t.Fatalf("epochs %v: want exactly 1..%d, each once", all, workers*each)
		}
	}
	inst, err := st.GetInstallation(ctx)
	must(t, err)
	if inst.OwnerEpoch != workers*each {
		t.Errorf("installation epoch %d, want %d", inst.OwnerEpoch, workers*each)
	}
}
