package reset_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/internal/writers"
	"berth.dev/core/reset"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox"
)

// view is the owner's store as the daemon gives it to the Runner: reads
// and the owner's writes.
type view struct {
	*store.Reader
	*store.Owner
}

func generation() store.NewGeneration {
	return store.NewGeneration{
		ProviderKind: "docker", PublicConfig: []byte(`{}`), Observations: []byte(`{}`),
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive: 8, MaxRetained: 16,
		},
	}
}

// fixture is a committed generation 1 with two running Sessions on a
// present node.
type fixture struct {
	st       *storetest.Owned
	sessions []store.SessionBundle
	bus      *events.Bus
	closed   atomic.Int32
	drains   atomic.Int32
}

func (f *fixture) CloseAdmission() { f.closed.Add(1) }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st := storetest.Owner(t, storetest.New(t))
	if _, err := st.CommitGeneration(t.Context(), storetest.Seen(t, st), generation()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, bus: events.New()}
	for range 2 {
		b, _ := storetest.RunningSession(t, st)
		f.sessions = append(f.sessions, b)
	}
	return f
}

func (f *fixture) runner(t *testing.T, st *storetest.Owned, drain func(ctx context.Context, change func() error) error,
	restore func(context.Context) error) *reset.Runner {
	t.Helper()
	if drain == nil {
		drain = func(_ context.Context, change func() error) error { f.drains.Add(1); return change() }
	}
	r, err := reset.NewRunner(reset.Config{
		Store: view{st.Store.Reader, st.Owner}, Events: f.bus, Drain: drain, Restore: restore, Reader: st.Store.Reader,
		Admission: f, NewID: uuid.New,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) start(t *testing.T) store.Reset {
	t.Helper()
	svc, err := reset.NewService(view{f.st.Store.Reader, f.st.Owner}, f.bus, uuid.New, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := svc.Start(t.Context(), 0, store.NewAdminProvenance(uuid.New()))
	if err != nil {
		t.Fatal(err)
	}
	if s.Deadline.Sub(s.RequestedAt) != reset.DefaultTimeout {
		t.Fatalf("deadline %s after the request", s.Deadline.Sub(s.RequestedAt))
	}
	return s.Reset
}

// releaseAll confirms the cleanup of every allocation the reset's
// archives requested and releases it, as the nodes' workers do once the
// compute is gone.
func (f *fixture) releaseAll(t *testing.T) {
	t.Helper()
	for _, b := range f.sessions {
		a, err := f.st.GetAllocation(t.Context(), b.Allocation.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.State != store.AllocationCleanupRequested {
			t.Fatalf("allocation %s is %s, want cleanup requested by the archive", a.ID, a.State)
		}
		storetest.Release(t, f.st, a)
	}
}

func phase(t *testing.T, st *storetest.Owned, id uuid.UUID) store.Reset {
	t.Helper()
	r, err := st.GetReset(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRunnerWaitsForHeldThenClears: a pass archives every Session and
// waits while their allocations are held, whatever the number of passes;
// once the workers released them the next pass drains the lanes, clears
// the deployment and announces the empty provider.
func TestRunnerWaitsForHeldThenClears(t *testing.T) {
	f := newFixture(t)
	gen := f.bus.Subscribe(events.Any(events.Generation))
	defer gen.Close()
	r := f.runner(t, f.st, nil, nil)
	rs := f.start(t)
	for range 3 {
		if err := r.Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	got := phase(t, f.st, rs.ID)
	if got.Phase != store.ResetDraining || got.SessionsArchived != 2 || got.Held != 2 || got.HeldOffline != 0 || got.ProgressAt == nil {
		t.Fatalf("while held: %+v", got)
	}
	if f.drains.Load() != 0 || len(gen.Take()) != 0 {
		t.Fatal("the runner drained or announced while resources were held")
	}
	f.releaseAll(t)
	if err := r.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	got = phase(t, f.st, rs.ID)
	if got.Phase != store.ResetDone || got.EmptyGeneration != 2 || f.drains.Load() != 1 {
		t.Fatalf("after release: %+v, %d drains", got, f.drains.Load())
	}
	if len(gen.Take()) != 1 {
		t.Fatal("the empty provider was not announced")
	}
	if f.closed.Load() != 0 {
		t.Fatal("admission closed")
	}
}

// TestRunnerRestoresAfterFailedFinalization: a drain that fails (or a
// final transaction that does) changes nothing and restores the committed
// provider; the reset stays finalizing and a later pass completes it.
func TestRunnerRestoresAfterFailedFinalization(t *testing.T) {
	f := newFixture(t)
	restores := atomic.Int32{}
	fail := atomic.Bool{}
	fail.Store(true)
	drain := func(_ context.Context, change func() error) error {
		if fail.Load() {
			return errors.New("injected: undrained")
		}
		return change()
	}
	r := f.runner(t, f.st, drain, func(context.Context) error { restores.Add(1); return nil })
	rs := f.start(t)
	if err := r.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.releaseAll(t)
	if err := r.Pass(t.Context()); err == nil || errors.Is(err, reset.ErrOwnerStop) {
		t.Fatalf("failed finalization: %v", err)
	}
	if got := phase(t, f.st, rs.ID); got.Phase != store.ResetFinalizing || restores.Load() != 1 || f.closed.Load() != 0 {
		t.Fatalf("after the failed finalization: %s, %d restores, %d closes", got.Phase, restores.Load(), f.closed.Load())
	}
	if g, err := f.st.CurrentGeneration(t.Context()); err != nil || g.Generation != 1 {
		t.Fatalf("the committed generation after a failed finalization: %d, %v", g.Generation, err)
	}
	fail.Store(false)
	if err := r.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := phase(t, f.st, rs.ID); got.Phase != store.ResetDone {
		t.Fatalf("after the retry: %s", got.Phase)
	}
}

// TestRunnerOwnerStopsWhenRestoreFails: when the restore fails too,
// admission closes and the runner ends with ErrOwnerStop; a new owner
// over the same database (another epoch, the lease taken over) resumes
// the reset from its durable phase and completes it.
func TestRunnerOwnerStopsWhenRestoreFails(t *testing.T) {
	f := newFixture(t)
	drain := func(context.Context, func() error) error { return errors.New("injected: undrained") }
	r := f.runner(t, f.st, drain, func(context.Context) error { return errors.New("injected: restore") })
	rs := f.start(t)
	if err := r.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.releaseAll(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, reset.ErrOwnerStop) {
		t.Fatalf("run: %v", err)
	}
	if f.closed.Load() != 1 {
		t.Fatalf("admission closed %d times", f.closed.Load())
	}

	// The next owner: a new epoch takes the lease.
	epoch, err := f.st.NextOwnerEpoch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Pool().Exec(t.Context(), `UPDATE execution_lease SET owner_epoch = $1`, int64(epoch)); err != nil {
		t.Fatal(err)
	}
	next := storetest.As(f.st.Store, epoch)
	if err := f.runner(t, next, nil, nil).Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := phase(t, next, rs.ID); got.Phase != store.ResetDone {
		t.Fatalf("the next owner left the reset %s", got.Phase)
	}
	// The deposed owner's runner is fenced.
	if _, err := f.st.Owner.FinalizeReset(t.Context(), rs, uuid.New()); err == nil {
		t.Fatal("the deposed owner wrote")
	}
}

// TestRunnerFailsPastDeadline: past its deadline an unfinished reset ends
// failed on the next pass and admission reopens, the committed
// generation kept.
func TestRunnerFailsPastDeadline(t *testing.T) {
	f := newFixture(t)
	r := f.runner(t, f.st, nil, nil)
	rs := f.start(t)
	if err := r.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Pool().Exec(t.Context(),
		`UPDATE deployment_resets SET requested_at = now() - interval '2 hours', deadline = now() - interval '1 second' WHERE id = $1`, rs.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := phase(t, f.st, rs.ID)
	if got.Phase != store.ResetFailed || got.FailureCode != store.ResetFailureDeadline || got.Held != 2 {
		t.Fatalf("past the deadline: %+v", got)
	}
	if g, err := f.st.CurrentGeneration(t.Context()); err != nil || g.Generation != 1 {
		t.Fatalf("current generation: %d, %v", g.Generation, err)
	}
}

// TestRunnerHoldsNoAllocationWrite: the runner's store holds no write of
// an allocation, a placement or a node (a reset never releases, abandons
// or cleans anything itself), and its own writes are called only here.
func TestRunnerHoldsNoAllocationWrite(t *testing.T) {
	it := reflect.TypeFor[reset.Store]()
	var got []string
	for i := range it.NumMethod() {
		got = append(got, it.Method(i).Name)
	}
	want := []string{"ActiveReset", "ArchiveForReset", "FailExpiredReset", "FinalizeReset", "ListHeld", "MoveReset",
		"RecordResetProgress", "ResetPage"}
	if !slices.Equal(got, want) {
		t.Fatalf("reset.Store is %v, want %v: a new method must not write allocations", got, want)
	}
	callers, err := writers.Callers("berth.dev/core/reset", reset.Writes)
	if err != nil {
		t.Fatal(err)
	}
	own, err := writers.Callers("", reset.Writes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(own, "\n"), "berth.dev/core/reset: runner.go:") {
		t.Fatalf("the check found none of core/reset's own writes: %q", own)
	}
	if len(callers) > 0 {
		t.Fatalf("a reset's rows have one writer, core/reset; these write them:\n%s", strings.Join(callers, "\n"))
	}
}
