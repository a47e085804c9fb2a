package lifecycle

import (
	"context"
	"maps"
	"slices"
	"sync"

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
}

type running struct {
	w      *Worker
	cancel context.CancelFunc
	done   chan struct{}
}

// NewCoordinator returns a Coordinator with no workers.
func NewCoordinator(cfg Config) *Coordinator {
	return &Coordinator{cfg: cfg.withDefaults(), workers: map[uuid.UUID]*running{}}
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
			c.Stop(n)
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

// Stop cancels node's worker and waits for it to end (its in-flight
// provider call ends at its context's cancellation).
func (c *Coordinator) Stop(node uuid.UUID) {
	c.mu.Lock()
	r := c.workers[node]
	delete(c.workers, node)
	c.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// Close stops accepting nodes, cancels every worker and waits for all of
// them.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	all := c.workers
	c.workers = map[uuid.UUID]*running{}
	c.mu.Unlock()
	for _, r := range all {
		r.cancel()
	}
	for _, r := range all {
		<-r.done
	}
}
