package lifecycle

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Coordinator runs one Worker per node it is told about. It holds its map
// mutex only to read or change the map and the schedule, never across a
// database call, a provider call or a wait: stopping a worker drains it
// under the mutex and waits for it after releasing the mutex.
//
// A worker between passes costs no goroutine, timer or channel: one
// scheduler goroutine keeps every idle worker in a heap by the time of its
// next pass (an Interval after its last one ended, or now when woken) and
// starts each pass on a goroutine of its own that ends with it. A node
// never has two passes at once (a wake during a pass makes the next one
// start when it ends), and a pass stuck on one node's provider holds only
// its own goroutine: no other node's pass waits for it.
//
// Its drains are of two kinds. A planned drain (Stop, Restart: a node
// removed, retired, or retired by a deployment replacement) never cancels
// an operation in flight: past DrainTimeout it reports an owner failure
// (Config.Admission: Core closes admission) and the late worker keeps
// its node's lifecycle identity until Close. Close, the owner's shutdown
// before it releases the execution lease, drains the same way and then
// cancels what is still running.
type Coordinator struct {
	cfg Config

	mu      sync.Mutex
	closed  bool
	workers map[uuid.UUID]*running
	// held are the nodes without a worker whose Restart is running its
	// change: Ensure starts no worker for them until the change ended.
	held map[uuid.UUID]bool
	// gates serialise the planned drains (Stop, Restart) of each node
	// (lockGates).
	gates map[uuid.UUID]*sync.Mutex
	// idle are the workers between passes, by the time of their next.
	idle schedule
	// kick wakes the scheduler: a worker became idle, was woken or
	// added, or the Coordinator closed.
	kick chan struct{}
	// scheduling is set once the scheduler goroutine runs.
	scheduling bool
}

type running struct {
	w *Worker
	// ctx is the worker's passes' context: the Coordinator's lifetime,
	// with the worker's drain channel (halted); cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	// done is closed once the worker stopped: drained or cancelled with
	// no pass in flight.
	done chan struct{}
	// failed is set when a planned drain passed its bound: the worker
	// keeps its node's lifecycle identity (no other starts) until the
	// Coordinator closes, and every later Stop or Restart of its node
	// fails at once (the drain barrier stays closed).
	failed bool

	// The schedule, under the Coordinator's mutex: due is the time of
	// the next pass, index the worker's place in the idle heap (-1 while
	// a pass runs or once stopped); woken asks for a pass as soon as the
	// one in flight ends.
	due     time.Time
	index   int
	inPass  bool
	woken   bool
	stopped bool
}

// NewCoordinator returns a Coordinator with no workers.
func NewCoordinator(cfg Config) *Coordinator {
	return &Coordinator{cfg: cfg.withDefaults(), workers: map[uuid.UUID]*running{},
		held: map[uuid.UUID]bool{}, gates: map[uuid.UUID]*sync.Mutex{}, kick: make(chan struct{}, 1)}
}

// Ensure starts a worker for each node that has none. Workers of nodes not
// listed keep running (an offline node's retained resources stay
// observable); Stop ends one. A worker's lifetime is the Coordinator's,
// not ctx's: only Stop, Restart and Close end it (ctx gives its values).
// A node whose planned drain failed keeps its late worker, so it gets no
// new one; nor does a node while a Restart runs its change. After Close
// it does nothing.
func (c *Coordinator) Ensure(ctx context.Context, nodes ...uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	added := false
	for _, n := range nodes {
		if _, ok := c.workers[n]; ok || c.held[n] {
			continue
		}
		w := NewWorker(c.cfg, n)
		wctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), drainKey{}, w.drain))
		r := &running{w: w, ctx: wctx, cancel: cancel, done: make(chan struct{}), due: time.Now(), index: -1}
		c.workers[n] = r
		heap.Push(&c.idle, r)
		added = true
	}
	if added && !c.scheduling {
		c.scheduling = true
		go c.schedule()
	}
	if added {
		c.poke()
	}
}

// poke wakes the scheduler.
func (c *Coordinator) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// schedule is the scheduler goroutine: it starts the pass of every idle
// worker whose time came, then sleeps until the next one's, or until
// poked, and returns once the Coordinator closed.
func (c *Coordinator) schedule() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		now := time.Now()
		wait := time.Hour
		for c.idle.Len() > 0 {
			r := c.idle[0]
			if d := r.due.Sub(now); d > 0 {
				wait = d
				break
			}
			heap.Pop(&c.idle)
			r.inPass = true
			go c.pass(r)
		}
		c.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-c.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// pass runs one pass of r's worker, then schedules its next (an Interval
// later, or at once if it was woken meanwhile) or, if the worker is
// draining or cancelled, stops it.
func (c *Coordinator) pass(r *running) {
	err := r.w.Pass(r.ctx)
	if err != nil && !errors.Is(err, errDrained) && r.ctx.Err() == nil {
		r.w.log.Warn("lifecycle pass failed", "error", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r.inPass = false
	if halted(r.ctx) != nil {
		c.stop(r)
		return
	}
	r.due = time.Now().Add(c.cfg.Interval)
	if r.woken {
		r.due, r.woken = time.Now(), false
	}
	heap.Push(&c.idle, r)
	c.poke()
}

// stop marks r stopped (its done closed) and takes it off the schedule.
// The caller holds the mutex and no pass of r is in flight.
func (c *Coordinator) stop(r *running) {
	if r.stopped {
		return
	}
	if r.index >= 0 {
		heap.Remove(&c.idle, r.index)
	}
	r.stopped = true
	close(r.done)
}

// drainOne asks r's worker to drain (Worker.Drain); a worker between
// passes stops at once.
func (c *Coordinator) drainOne(r *running) {
	r.w.Drain()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.inPass {
		c.stop(r)
	}
}

// cancelOne cancels r's passes' context; a worker between passes stops at
// once, one in a pass when the pass returns.
func (c *Coordinator) cancelOne(r *running) {
	r.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.inPass {
		c.stop(r)
	}
}

// schedule is the heap of idle workers by due time (container/heap).
type schedule []*running

func (s schedule) Len() int           { return len(s) }
func (s schedule) Less(i, j int) bool { return s[i].due.Before(s[j].due) }
func (s schedule) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].index, s[j].index = i, j
}
func (s *schedule) Push(x any) {
	r := x.(*running)
	r.index = len(*s)
	*s = append(*s, r)
}
func (s *schedule) Pop() any {
	old := *s
	r := old[len(old)-1]
	old[len(old)-1] = nil
	r.index = -1
	*s = old[:len(old)-1]
	return r
}

// Sync makes the workers those of exactly nodes: it starts a worker for
// each listed node that has none (Ensure) and stops the workers of nodes
// not listed. The caller lists every node that may hold anything, enabled
// or retired, connected or not, so an offline or retired node keeps its
// worker (its allocations stay observed and its cleanup completes); only
// a node that left the list (removed, which requires that it holds
// nothing) loses it.
func (c *Coordinator) Sync(ctx context.Context, nodes ...uuid.UUID) {
	c.Ensure(ctx, nodes...)
	keep := make(map[uuid.UUID]bool, len(nodes))
	for _, n := range nodes {
		keep[n] = true
	}
	for _, n := range c.Nodes() {
		if !keep[n] {
			_ = c.Stop(n) // past the bound: an owner failure, reported by Stop
		}
	}
}

// Nodes returns the nodes that have a worker.
func (c *Coordinator) Nodes() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.workers))
}

// Wake asks node's worker for a pass now, or, if one is in flight, as
// soon as it ends.
func (c *Coordinator) Wake(node uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.workers[node]
	switch {
	case r == nil || r.stopped:
	case r.inPass:
		r.woken = true
	case r.index >= 0:
		r.due = time.Now()
		heap.Fix(&c.idle, r.index)
		c.poke()
	}
}

// ErrUndrained is the owner failure of a planned drain (Stop, Restart)
// whose worker did not reach the end of its operation in flight within
// DrainTimeout. Nothing was cancelled: the operation ends and is recorded
// as usual, and the worker stops after it but keeps its node's lifecycle
// identity until the Coordinator closes. The drain barrier stays closed:
// the node gets no new worker, a change Restart guarded was not made, and
// every later Stop or Restart of the node fails the same way at once.
// Config.Admission was closed.
var ErrUndrained = errors.New("lifecycle worker did not drain in time; nothing was cancelled")

// ErrDrainTimeout is the owner failure of Close whose workers did not all
// reach the end of their operation in flight within DrainTimeout: at the
// owner's shutdown the late ones are cancelled (the guide's lease
// release), so their outcome may be unknown (observed again, never
// replayed, by the next owner's worker).
var ErrDrainTimeout = errors.New("lifecycle worker did not drain in time at shutdown; cancelled")

// Stop drains node's worker (Worker.Drain: it stops between operations,
// never cancelling the store or provider operation in flight) and waits
// for it, at most DrainTimeout. A worker still busy then is not
// cancelled: Stop reports an owner failure and returns ErrUndrained, and
// the worker keeps the node's lifecycle identity until Close.
func (c *Coordinator) Stop(node uuid.UUID) error {
	unlock := c.lockGates([]uuid.UUID{node})
	defer unlock()
	c.mu.Lock()
	r := c.workers[node]
	failed := r != nil && r.failed
	c.mu.Unlock()
	switch {
	case r == nil:
		return nil
	case failed:
		return ErrUndrained
	}
	if err := c.drain("stop", []*running{r}); err != nil {
		return err
	}
	c.forget([]*running{r})
	return nil
}

// Close stops accepting nodes and drains every worker like Stop, all at
// once under one DrainTimeout; it is the owner's shutdown, before the
// execution lease is released, so past the bound it cancels the workers
// still running, waits for them, reports an owner failure and returns
// ErrDrainTimeout.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.closed = true
	all := slices.Collect(maps.Values(c.workers))
	c.workers = map[uuid.UUID]*running{}
	c.mu.Unlock()
	c.poke()
	late := c.await(all)
	for _, r := range all {
		c.cancelOne(r)
	}
	for _, r := range late {
		<-r.done
	}
	if len(late) > 0 {
		c.ownerFailure("shutdown (the late workers were cancelled)", late)
		return ErrDrainTimeout
	}
	return nil
}

// Restart gives the workers of nodes a new lifecycle identity around
// change, through the drain gate: it drains them between operations
// (each one's store or provider operation in flight ends and is recorded,
// nothing is cancelled), all within one DrainTimeout, runs change while
// no worker of any of nodes runs, then starts a new worker for each node
// that had one, whatever change returned. Node retirement
// (nodes.Registry.Retire) and a deployment replacement that retires nodes
// (deployment.Service.Replace) use it through Gate, so that when the
// retirement commits no lifecycle operation on those nodes begun before
// it is still in flight. A node without a worker gets none while change
// runs.
//
// Past the bound Restart cancels nothing (a change of configuration
// never cancels an operation in flight) and does not run change: it
// reports an owner failure and returns ErrUndrained; each late worker
// stops at the end of its operation and keeps its node's identity until
// the Coordinator closes, and the nodes whose workers did drain get new
// ones. A node whose planned drain failed before fails every Restart at
// once.
func (c *Coordinator) Restart(ctx context.Context, nodes []uuid.UUID, change func() error) error {
	nodes = uniqueSorted(nodes)
	unlock := c.lockGates(nodes)
	defer unlock()
	var rs []*running
	var bare []uuid.UUID
	c.mu.Lock()
	for _, n := range nodes {
		if r := c.workers[n]; r != nil && r.failed {
			c.mu.Unlock()
			return ErrUndrained
		}
	}
	for _, n := range nodes {
		if r := c.workers[n]; r != nil {
			rs = append(rs, r)
		} else {
			c.held[n] = true
			bare = append(bare, n)
		}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		for _, n := range bare {
			delete(c.held, n)
		}
		c.mu.Unlock()
	}()
	if err := c.drain("restart", rs); err != nil {
		// The change is not made; the workers that did drain stopped,
		// so their nodes get new ones (the late ones keep theirs).
		c.renew(ctx, rs)
		return err
	}
	err := change()
	c.renew(ctx, rs)
	return err
}

// Gate is Restart as the retirement gate of a caller (Core gives it to
// nodes.RegistryOptions.Gate and deployment.Options.Gate):
// ErrUndrained becomes undrained, the caller's own refusal. The new
// workers take none of the request's values (its trace, its deadline).
func (c *Coordinator) Gate(undrained error) func(ctx context.Context, nodes []uuid.UUID, change func() error) error {
	return func(_ context.Context, nodes []uuid.UUID, change func() error) error {
		err := c.Restart(context.Background(), nodes, change)
		if errors.Is(err, ErrUndrained) {
			return undrained
		}
		return err
	}
}

// lockGates takes the planned-drain mutex of each of nodes, in ascending
// order (so two callers never wait on each other), and returns their
// release: one node's planned drains never run beside each other or
// beside the worker another one started.
func (c *Coordinator) lockGates(nodes []uuid.UUID) (unlock func()) {
	sorted := uniqueSorted(nodes)
	c.mu.Lock()
	ms := make([]*sync.Mutex, len(sorted))
	for i, n := range sorted {
		m := c.gates[n]
		if m == nil {
			m = &sync.Mutex{}
			c.gates[n] = m
		}
		ms[i] = m
	}
	c.mu.Unlock()
	for _, m := range ms {
		m.Lock()
	}
	return func() {
		for _, m := range slices.Backward(ms) {
			m.Unlock()
		}
	}
}

// uniqueSorted is nodes in ascending order, each once.
func uniqueSorted(nodes []uuid.UUID) []uuid.UUID {
	sorted := slices.SortedFunc(slices.Values(nodes), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(sorted)
}

// drain is a planned drain of rs: it drains them within one DrainTimeout
// and cancels nothing. Past the bound it marks the late workers failed
// (they keep their nodes' identity), reports an owner failure for cause
// and returns ErrUndrained.
func (c *Coordinator) drain(cause string, rs []*running) error {
	late := c.await(rs)
	if len(late) == 0 {
		return nil
	}
	c.mu.Lock()
	for _, r := range late {
		r.failed = true
	}
	c.mu.Unlock()
	c.ownerFailure(cause+" (nothing was cancelled; each late worker keeps its node until Core stops)", late)
	return ErrUndrained
}

// await asks each of rs to drain (Worker.Drain) and waits for them, at
// most DrainTimeout in all; it returns the ones still running then.
func (c *Coordinator) await(rs []*running) []*running {
	for _, r := range rs {
		c.drainOne(r)
	}
	deadline := time.NewTimer(c.cfg.DrainTimeout)
	defer deadline.Stop()
	for i, r := range rs {
		select {
		case <-r.done:
			continue
		case <-deadline.C:
		}
		// Past the bound: every worker not done now is late.
		var late []*running
		for _, r := range rs[i:] {
			select {
			case <-r.done:
			default:
				late = append(late, r)
			}
		}
		return late
	}
	return nil
}

// forget removes the drained workers rs from the map (unless one was
// replaced meanwhile) and releases their contexts.
func (c *Coordinator) forget(rs []*running) {
	c.mu.Lock()
	for _, r := range rs {
		if c.workers[r.w.Node()] == r {
			delete(c.workers, r.w.Node())
		}
	}
	c.mu.Unlock()
	for _, r := range rs {
		c.cancelOne(r)
	}
}

// renew starts a new worker for each node whose worker in rs drained (a
// late, failed one keeps its node).
func (c *Coordinator) renew(ctx context.Context, rs []*running) {
	var drained []*running
	c.mu.Lock()
	for _, r := range rs {
		if !r.failed {
			drained = append(drained, r)
		}
	}
	c.mu.Unlock()
	c.forget(drained)
	nodes := make([]uuid.UUID, len(drained))
	for i, r := range drained {
		nodes[i] = r.w.Node()
	}
	c.Ensure(ctx, nodes...)
}

// ownerFailure reports the owner failure of a drain past its bound: it
// closes Config.Admission, logs it with the late workers' nodes and
// records it (Config.OwnerFailures).
func (c *Coordinator) ownerFailure(cause string, late []*running) {
	nodes := make([]uuid.UUID, len(late))
	for i, r := range late {
		nodes[i] = r.w.Node()
	}
	c.cfg.Log.Error("owner failure: lifecycle workers did not drain within the bound", "cause", cause,
		"nodes", nodes, "bound", c.cfg.DrainTimeout)
	if c.cfg.Admission != nil {
		c.cfg.Admission.CloseAdmission()
		c.cfg.Log.Error("owner failure: admission closed until Core restarts", "nodes", nodes, "cause", "lifecycle drain")
	}
	if c.cfg.OwnerFailures != nil {
		c.cfg.OwnerFailures.OwnerFailure(cause, nodes)
	}
}
