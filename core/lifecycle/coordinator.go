package lifecycle

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Coordinator runs one Worker per node it is told about. It holds its map
// mutex only to read or change the map, never across a database call, a
// provider call or a wait: stopping a worker cancels it under the mutex
// and waits for it after releasing the mutex.
type Coordinator struct {
	cfg Config

	mu      sync.Mutex
	closed  bool
	workers map[uuid.UUID]*running
	// restarts serialises the Restarts of each node (restartLock).
	restarts map[uuid.UUID]*sync.Mutex
}

type running struct {
	w      *Worker
	cancel context.CancelFunc
	done   chan struct{}
	// failed is set when a Restart's drain passed its bound: the worker
	// keeps its identity until the Coordinator closes (Restart).
	failed bool
}

// NewCoordinator returns a Coordinator with no workers.
func NewCoordinator(cfg Config) *Coordinator {
	return &Coordinator{cfg: cfg.withDefaults(), workers: map[uuid.UUID]*running{}, restarts: map[uuid.UUID]*sync.Mutex{}}
}

// Ensure starts a worker for each node that has none. Workers of nodes not
// listed keep running (an offline node's retained resources stay
// observable); Stop ends one. A worker's lifetime is the Coordinator's,
// not ctx's: only Stop and Close cancel it (ctx gives its values). After
// Close it does nothing.
func (c *Coordinator) Ensure(ctx context.Context, nodes ...uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for _, n := range nodes {
		if _, ok := c.workers[n]; ok {
			continue
		}
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := &running{w: NewWorker(c.cfg, n), cancel: cancel, done: make(chan struct{})}
		c.workers[n] = r
		go func() {
			defer close(r.done)
			r.w.Run(wctx)
		}()
	}
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
			_ = c.Stop(n) // a late worker is logged as an owner failure
		}
	}
}

// Nodes returns the nodes that have a worker.
func (c *Coordinator) Nodes() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.workers))
}

// Wake asks node's worker for a pass now.
func (c *Coordinator) Wake(node uuid.UUID) {
	c.mu.Lock()
	r := c.workers[node]
	c.mu.Unlock()
	if r != nil {
		r.w.Wake()
	}
}

// ErrDrainTimeout is the owner failure of a stop whose worker did not
// reach the end of its operation in flight within DrainTimeout: the
// worker was cancelled hard, so that operation's outcome may be unknown
// (it is observed again, never replayed, by the next owner's worker).
var ErrDrainTimeout = errors.New("lifecycle worker did not drain in time; cancelled")

// Stop drains node's worker (Worker.Drain: it stops between operations,
// never cancelling the store or provider operation in flight) and waits
// for it, at most DrainTimeout; a worker still busy then is cancelled
// hard and Stop returns ErrDrainTimeout, logged as an owner failure.
func (c *Coordinator) Stop(node uuid.UUID) error {
	c.mu.Lock()
	r := c.workers[node]
	delete(c.workers, node)
	c.mu.Unlock()
	if r == nil {
		return nil
	}
	return c.drain([]*running{r})
}

// Close stops accepting nodes and drains every worker like Stop, all at
// once under one DrainTimeout.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.closed = true
	all := slices.Collect(maps.Values(c.workers))
	c.workers = map[uuid.UUID]*running{}
	c.mu.Unlock()
	return c.drain(all)
}

// ErrRestartFailed is the owner failure of a Restart whose worker did
// not reach the end of its operation in flight within DrainTimeout. The
// worker is not cancelled and keeps its identity until the Coordinator
// closes; the change Restart guarded was not made, and every later
// Restart of that node fails the same way at once (the drain barrier
// stays closed).
var ErrRestartFailed = errors.New("lifecycle worker did not drain in time for a restart")

// Restart gives node's worker a new lifecycle identity around change,
// through the drain gate: it drains the worker between operations (its
// store or provider operation in flight ends and is recorded, nothing is
// cancelled), runs change while no worker of node runs, then starts a
// new worker when there was one, whatever change returned. Node
// retirement uses it, so that when a retirement commits no lifecycle
// operation begun before it is still in flight.
//
// The wait is bounded by DrainTimeout. Past it Restart does not cancel
// the worker (a change of configuration never cancels an operation in
// flight): it does not run change, logs an owner failure and returns
// ErrRestartFailed; the worker stops at the end of its operation and the
// node gets no new one until the Coordinator closes (the caller closes
// admission; an owner restart recovers). Without a worker it just runs
// change.
func (c *Coordinator) Restart(ctx context.Context, node uuid.UUID, change func() error) error {
	serial := c.restartLock(node)
	serial.Lock()
	defer serial.Unlock()
	c.mu.Lock()
	r := c.workers[node]
	failed := r != nil && r.failed
	c.mu.Unlock()
	if failed {
		return ErrRestartFailed
	}
	if r == nil {
		return change()
	}
	r.w.Drain()
	deadline := time.NewTimer(c.cfg.DrainTimeout)
	defer deadline.Stop()
	select {
	case <-r.done:
	case <-deadline.C:
		c.mu.Lock()
		r.failed = true
		c.mu.Unlock()
		c.cfg.Log.Error("owner failure: a lifecycle worker did not drain within the bound for a restart; its node keeps it until Core stops",
			"node", node, "bound", c.cfg.DrainTimeout)
		return ErrRestartFailed
	}
	err := change()
	c.mu.Lock()
	if c.workers[node] == r {
		delete(c.workers, node)
	}
	c.mu.Unlock()
	c.Ensure(ctx, node)
	return err
}

// restartLock is the mutex that serialises node's Restarts, so that one
// Restart's change never runs beside the worker another one started.
func (c *Coordinator) restartLock(node uuid.UUID) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.restarts[node]
	if m == nil {
		m = &sync.Mutex{}
		c.restarts[node] = m
	}
	return m
}

// drain drains rs within one DrainTimeout, then cancels the ones still
// running and waits for them.
func (c *Coordinator) drain(rs []*running) error {
	for _, r := range rs {
		r.w.Drain()
	}
	deadline := time.NewTimer(c.cfg.DrainTimeout)
	defer deadline.Stop()
	var late []*running
	expired := false
	for _, r := range rs {
		if !expired {
			select {
			case <-r.done:
				continue
			case <-deadline.C:
				expired = true
			}
		}
		// Past the bound: every worker not done now is late.
		select {
		case <-r.done:
		default:
			late = append(late, r)
		}
	}
	for _, r := range rs {
		r.cancel()
	}
	for _, r := range late {
		<-r.done
		c.cfg.Log.Error("owner failure: a lifecycle worker did not drain within the bound and was cancelled",
			"node", r.w.Node(), "bound", c.cfg.DrainTimeout)
	}
	if len(late) > 0 {
		return ErrDrainTimeout
	}
	return nil
}
