package nodeagent

import (
	"fmt"
	"sync"

	"berth.dev/sandbox/errdefs"
)

// Fence admits calls only from Core's current connection: the connection
// id and owner epoch of the latest accepted Connect, and the node's
// deployment generation. A new Connect with an epoch no lower than the
// highest seen supersedes the previous connection, whose calls are then
// fenced.
type Fence struct {
	state      *StateDir
	generation uint64

	mu      sync.Mutex
	current string
	epoch   uint64
}

// NewFence returns a fence over state for the given generation.
func NewFence(state *StateDir, generation uint64) *Fence {
	return &Fence{state: state, generation: generation}
}

// Generation returns the node's deployment generation.
func (f *Fence) Generation() uint64 { return f.generation }

// Connect makes connID with epoch the current connection. The epoch is
// persisted before the connection is admitted.
func (f *Fence) Connect(connID string, epoch, generation uint64) error {
	if connID == "" {
		return errdefs.Invalid("metadata.connection_id", "required")
	}
	if generation != f.generation {
		return fmt.Errorf("generation %d is not the node's %d: %w", generation, f.generation, errdefs.ErrFenced)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.state.AcceptEpoch(epoch); err != nil {
		return err
	}
	f.current, f.epoch = connID, epoch
	return nil
}

// Disconnect forgets connID if it is still current.
func (f *Fence) Disconnect(connID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == connID {
		f.current = ""
	}
}

// Check admits a call from connID at epoch for generation.
func (f *Fence) Check(connID string, epoch, generation uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case generation != f.generation:
		return fmt.Errorf("generation mismatch: %w", errdefs.ErrFenced)
	case epoch < f.state.HighestEpoch():
		return fmt.Errorf("stale owner epoch: %w", errdefs.ErrFenced)
	case f.current == "" || connID != f.current || epoch != f.epoch:
		return fmt.Errorf("not the current connection: %w", errdefs.ErrFenced)
	}
	return nil
}
