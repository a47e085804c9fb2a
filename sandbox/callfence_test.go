package sandbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

var (
	refA = sandbox.Reference{TenantID: "t", EnvironmentID: "e1", AllocationID: "a1"}
	refB = sandbox.Reference{TenantID: "t", EnvironmentID: "e2", AllocationID: "a2"}
)

// A Reference's calls never overlap; another Reference's run beside them.
func TestCallFenceOneCallPerReference(t *testing.T) {
	var f sandbox.CallFence
	ctx := context.Background()
	doneA, err := f.Enter(ctx, refA)
	if err != nil {
		t.Fatal(err)
	}
	doneB, err := f.Enter(ctx, refB)
	if err != nil {
		t.Fatalf("another Reference waited for refA's call: %v", err)
	}
	if f.Active() != 2 {
		t.Fatalf("Active = %d, want 2", f.Active())
	}
	entered := make(chan func())
	go func() {
		d, err := f.Enter(ctx, refA)
		if err != nil {
			t.Error(err)
		}
		entered <- d
	}()
	select {
	case <-entered:
		t.Fatal("a second call about refA entered while the first runs")
	case <-time.After(50 * time.Millisecond):
	}
	doneA()
	doneA() // a second done changes nothing
	second := <-entered
	if f.Active() != 2 {
		t.Fatalf("Active = %d after the handover, want 2", f.Active())
	}
	second()
	doneB()
	if f.Active() != 0 {
		t.Fatalf("Active = %d at the end, want 0", f.Active())
	}
}

// A caller that gives up waiting for its turn gets its context's error
// and runs nothing.
func TestCallFenceWaitEndsWithTheCaller(t *testing.T) {
	var f sandbox.CallFence
	done, err := f.Enter(context.Background(), refA)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var ran atomic.Bool
	_, err = sandbox.Detach(&f, ctx, refA, time.Second, func(context.Context) (int, error) {
		ran.Store(true)
		return 0, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || ran.Load() {
		t.Fatalf("Detach behind a running call: %v, native ran %v; want the deadline and nothing run", err, ran.Load())
	}
	if f.Active() != 1 {
		t.Fatalf("Active = %d, want only the first call", f.Active())
	}
}

// A detached call outlives its caller: the caller returns when its context
// ends, the call keeps its Reference's turn and the fence's count until
// its native work returns, and Exclude waits for it.
func TestCallFenceDetachedCallIsWaitedFor(t *testing.T) {
	var f sandbox.CallFence
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	type ended struct{ err error }
	var nativeErr atomic.Value
	returned := make(chan error, 1)
	go func() {
		_, err := sandbox.Detach(&f, ctx, refA, time.Hour, func(nctx context.Context) (string, error) {
			<-release
			nativeErr.Store(ended{nctx.Err()})
			return "made", nil
		})
		returned <- err
	}()
	waitFor(t, func() bool { return f.Active() == 1 })
	cancel()
	if err := <-returned; !errors.Is(err, context.Canceled) {
		t.Fatalf("Detach returned %v to a cancelled caller, want context.Canceled", err)
	}
	if f.Active() != 1 {
		t.Fatalf("Active = %d after the caller left, want the detached call still counted", f.Active())
	}

	excluded := make(chan error, 1)
	go func() {
		readmit, err := f.Exclude(context.Background())
		if err == nil {
			defer readmit()
		}
		excluded <- err
	}()
	select {
	case err := <-excluded:
		t.Fatalf("Exclude returned (%v) while the detached call still runs", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-excluded; err != nil {
		t.Fatalf("Exclude: %v", err)
	}
	if got := nativeErr.Load().(ended).err; got != nil {
		t.Fatalf("the native call's context ended (%v) within the grace", got)
	}
}

// The grace bounds a detached call: past it, its context is cancelled.
func TestCallFenceGraceEndsTheDetachedCall(t *testing.T) {
	var f sandbox.CallFence
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() {
		_, _ = sandbox.Detach(&f, ctx, refA, 30*time.Millisecond, func(nctx context.Context) (int, error) {
			<-nctx.Done()
			ended <- nctx.Err()
			return 0, nctx.Err()
		})
	}()
	waitFor(t, func() bool { return f.Active() == 1 })
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("native context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the detached call's context was never cancelled after the grace")
	}
	waitFor(t, func() bool { return f.Active() == 0 })
}

// While excluded, calls are refused at once with the fixed refusal, also
// those that were waiting for their turn; readmit admits them again.
func TestCallFenceExcluded(t *testing.T) {
	var f sandbox.CallFence
	ctx := context.Background()
	first, err := f.Enter(ctx, refA)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := f.Enter(ctx, refA)
		waiting <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it queue behind first
	excluded := make(chan func(), 1)
	go func() {
		readmit, err := f.Exclude(ctx)
		if err != nil {
			t.Error(err)
		}
		excluded <- readmit
	}()
	waitFor(t, func() bool {
		done, err := f.Enter(ctx, refB)
		if err == nil {
			done() // admitted before the exclusion began
		}
		return errors.Is(err, sandbox.ErrCallFenced)
	})
	first()
	readmit := <-excluded
	if err := <-waiting; !errors.Is(err, sandbox.ErrCallFenced) || !errors.Is(err, errdefs.ErrFenced) {
		t.Fatalf("a call queued before the exclusion got %v, want ErrCallFenced", err)
	}
	if r, ok := errdefs.AsRefusal(sandbox.ErrCallFenced); !ok || r.Reason != "call_fenced" {
		t.Fatalf("ErrCallFenced is not the refusal call_fenced: %+v", r)
	}
	readmit()
	readmit() // a second readmit changes nothing
	done, err := f.Enter(ctx, refA)
	if err != nil {
		t.Fatalf("after readmit: %v", err)
	}
	done()
}

// Exclude past its context readmits and says nothing was excluded.
func TestCallFenceExcludeBusy(t *testing.T) {
	var f sandbox.CallFence
	done, err := f.Enter(context.Background(), refA)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.Exclude(ctx); !errors.Is(err, sandbox.ErrFenceBusy) {
		t.Fatalf("Exclude with a call running past its context: %v, want ErrFenceBusy", err)
	}
	d2, err := f.Enter(context.Background(), refB)
	if err != nil {
		t.Fatalf("after a busy Exclude calls must be admitted: %v", err)
	}
	d2()
	done()
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
