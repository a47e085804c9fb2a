package sandbox

import (
	"context"
	"sync"
	"time"

	"berth.dev/sandbox/errdefs"
)

// ErrCallFenced refuses a native call while its adapter's CallFence is
// excluded: nothing was sent, so the caller may report its own absence
// receipt. Core excludes a fence only with its work drained, so a caller
// seeing it is a late one.
var ErrCallFenced error = errdefs.Refuse(errdefs.ErrFenced, "call_fenced",
	"the provider's native calls are fenced (its credential or generation is changing): nothing was sent; retry once the change is done")

// ErrFenceBusy is Exclude's answer when its context ended before every
// admitted call had finished: nothing was excluded, calls are admitted as
// before.
var ErrFenceBusy error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "call_fence_busy",
	"native calls were still running when the wait ended: nothing was excluded; retry, or wait for the provider's calls to finish")

// CallFence orders a direct adapter's native calls (the guide's "common
// sandbox.CallFence"): one at a time per Reference, none while the fence
// is excluded, and each counted until its native work has ended, not only
// until its caller stopped waiting. Core excludes it before it replaces a
// credential or closes an adapter, so no native call of the old setting
// runs behind the new one. The zero CallFence is ready to use; it must
// not be copied after first use.
type CallFence struct {
	mu       sync.Mutex
	excluded int
	active   int
	idle     chan struct{} // closed when active reaches 0, if someone waits
	turns    map[Reference]*turn
}

// turn is one Reference's semaphore and the number of its holders and
// waiters (the entry goes when that reaches zero).
type turn struct {
	sem chan struct{}
	n   int
}

// Enter admits one native call about ref. It waits, bounded by ctx, for
// ref's previous call to end (then the caller gets ctx's error and nothing
// may be sent), and refuses with ErrCallFenced while the fence is
// excluded. done must be called once the native work has ended (the
// helper exited, the HTTP exchange is over), never earlier; a second call
// of done does nothing.
func (f *CallFence) Enter(ctx context.Context, ref Reference) (done func(), err error) {
	f.mu.Lock()
	if f.excluded > 0 {
		f.mu.Unlock()
		return nil, ErrCallFenced
	}
	if f.turns == nil {
		f.turns = map[Reference]*turn{}
	}
	t := f.turns[ref]
	if t == nil {
		t = &turn{sem: make(chan struct{}, 1)}
		f.turns[ref] = t
	}
	t.n++
	f.mu.Unlock()

	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		f.leave(ref, t, false)
		return nil, ctx.Err()
	}
	f.mu.Lock()
	if f.excluded > 0 {
		// Excluded while this call waited for its turn.
		f.mu.Unlock()
		f.leave(ref, t, true)
		return nil, ErrCallFenced
	}
	f.active++
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.active--
			if f.active == 0 && f.idle != nil {
				close(f.idle)
				f.idle = nil
			}
			f.mu.Unlock()
			f.leave(ref, t, true)
		})
	}, nil
}

// leave gives back ref's turn (when held) and drops its entry once no
// call holds or waits for it.
func (f *CallFence) leave(ref Reference, t *turn, held bool) {
	if held {
		<-t.sem
	}
	f.mu.Lock()
	t.n--
	if t.n == 0 {
		delete(f.turns, ref)
	}
	f.mu.Unlock()
}

// Exclude stops admitting calls and waits, bounded by ctx, until every
// admitted call is done, detached ones included. It returns readmit,
// which admits calls again. When ctx ends first it readmits at once and
// returns ErrFenceBusy.
func (f *CallFence) Exclude(ctx context.Context) (readmit func(), err error) {
	f.mu.Lock()
	f.excluded++
	var wait chan struct{}
	if f.active > 0 {
		if f.idle == nil {
			f.idle = make(chan struct{})
		}
		wait = f.idle
	}
	f.mu.Unlock()
	var once sync.Once
	readmit = func() {
		once.Do(func() {
			f.mu.Lock()
			f.excluded--
			f.mu.Unlock()
		})
	}
	if wait == nil {
		return readmit, nil
	}
	select {
	case <-wait:
		return readmit, nil
	case <-ctx.Done():
		readmit()
		return nil, ErrFenceBusy
	}
}

// Active is the number of admitted calls that are not done.
func (f *CallFence) Active() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

// Detach runs native under f's turn for ref with a context that outlives
// the caller's cancellation by grace (ctx's deadline still binds it), and
// returns when native does or when ctx ends, whichever is first. In the
// second case native keeps ref's turn and f's count until it returns, so
// the next call about ref, and Exclude, wait for it: the direct form of
// the node agent's tracked calls. The caller then gets ctx's error, an
// unknown outcome.
func Detach[T any](f *CallFence, ctx context.Context, ref Reference, grace time.Duration,
	native func(context.Context) (T, error)) (T, error) {
	var zero T
	done, err := f.Enter(ctx, ref)
	if err != nil {
		return zero, err
	}
	nctx, cancel := detached(ctx, grace)
	type result struct {
		v   T
		err error
	}
	out := make(chan result, 1)
	go func() {
		defer done()
		defer cancel()
		v, err := native(nctx)
		out <- result{v, err}
	}()
	select {
	case r := <-out:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-out:
			return r.v, r.err
		default:
			return zero, ctx.Err()
		}
	}
}

// detached is a context that keeps ctx's values and deadline but is
// cancelled only grace after ctx is, or by the returned cancel.
func detached(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	var (
		nctx   context.Context
		cancel context.CancelFunc
	)
	if dl, ok := ctx.Deadline(); ok {
		nctx, cancel = context.WithDeadline(base, dl)
	} else {
		nctx, cancel = context.WithCancel(base)
	}
	var timer *time.Timer
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		timer = time.AfterFunc(grace, cancel)
		mu.Unlock()
	})
	return nctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
