package nodeagent

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"berth.dev/sandbox/errdefs"
)

// Fence admits calls only from Core's current connection: the connection
// id and owner epoch of the latest accepted Connect. A new Connect with an
// epoch no lower than the highest seen supersedes the previous connection,
// whose calls are then fenced. Which generation a call is for is the
// served set's business (Generations.Agent), not the fence's.
type Fence struct {
	state *StateDir
	log   *slog.Logger

	mu      sync.Mutex
	current string
	epoch   uint64
}

// NewFence returns a fence over state. log (nil: none) hears of a
// Connect refused because the state directory cannot take the new epoch,
// which only the host's operator can repair: the wire carries only the
// class (observation_unavailable: not now), never the path or the
// system's error.
func NewFence(state *StateDir, log *slog.Logger) *Fence {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Fence{state: state, log: log}
}

// Connect makes connID with epoch the current connection. The epoch is
// persisted before the connection is admitted.
func (f *Fence) Connect(connID string, epoch uint64) error {
	if connID == "" {
		return errdefs.Invalid("metadata.connection_id", "required")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.state.AcceptEpoch(epoch); err != nil {
		if errors.Is(err, errdefs.ErrObservationUnavailable) {
			f.log.Error("refused Core: the owner epoch cannot be persisted in the state directory; make it writable (and give it room), Core retries by itself",
				"state_dir", f.state.Path(), "error", err.Error())
		}
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

// Check admits a call from connID at epoch.
func (f *Fence) Check(connID string, epoch uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case epoch < f.state.HighestEpoch():
		return fmt.Errorf("stale owner epoch: %w", errdefs.ErrFenced)
	case f.current == "" || connID != f.current || epoch != f.epoch:
		return fmt.Errorf("not the current connection: %w", errdefs.ErrFenced)
	}
	return nil
}
