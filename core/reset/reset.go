package reset

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/store"
	"berth.dev/sandbox/errdefs"
)

// Timeout bounds (StartReset's timeout).
const (
	// DefaultTimeout is a reset's deadline after its request when the
	// request names none.
	DefaultTimeout = time.Hour
	// MinTimeout is the shortest deadline an operator may ask for: room
	// for a Turn's 20 s cancellation drain, a node's 45 s presence window
	// and its cleanup.
	MinTimeout = 5 * time.Minute
	// MaxTimeout is the longest (the schema's bound).
	MaxTimeout = store.MaxResetTimeout
)

// ServiceStore is what Service reads and writes.
type ServiceStore interface {
	StartReset(ctx context.Context, id uuid.UUID, timeout time.Duration, prov store.Provenance, eventID uuid.UUID) (store.Reset, error)
	GetReset(ctx context.Context, id uuid.UUID) (store.Reset, error)
	LatestReset(ctx context.Context) (store.Reset, error)
	ListHeld(ctx context.Context) ([]store.HeldLane, error)
}

// Service is the logic of StartReset and GetReset.
type Service struct {
	store ServiceStore
	bus   *events.Bus
	newID func() uuid.UUID
	// minTimeout is MinTimeout unless a test daemon lowers it.
	minTimeout time.Duration
}

// NewService returns the reset logic over st; bus wakes the Runner.
// minTimeout is the shortest timeout accepted (0: MinTimeout; tests of
// the whole daemon lower it to see a deadline pass).
func NewService(st ServiceStore, bus *events.Bus, newID func() uuid.UUID, minTimeout time.Duration) (*Service, error) {
	if st == nil || newID == nil {
		return nil, errors.New("reset: no store or id source")
	}
	if minTimeout <= 0 {
		minTimeout = MinTimeout
	}
	return &Service{store: st, bus: bus, newID: newID, minTimeout: minTimeout}, nil
}

// Status is a reset with what it waits for.
type Status struct {
	store.Reset
	// Waiting is, while the reset is active, what each lane holds now
	// (a fresh snapshot: store.ListHeld), so an operator sees which node
	// it waits for and whether that node is present.
	Waiting []store.HeldLane
}

// Start starts a deployment reset for prov's request with a deadline
// timeout after it (0: DefaultTimeout), or returns the one that request
// started. Only an administrator starts one.
func (s *Service) Start(ctx context.Context, timeout time.Duration, prov store.Provenance) (Status, error) {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout < s.minTimeout || timeout > MaxTimeout || timeout%time.Second != 0 {
		return Status{}, errdefs.Invalid("timeout", fmt.Sprintf("must be whole seconds from %s to %s", s.minTimeout, MaxTimeout))
	}
	r, err := s.store.StartReset(ctx, s.newID(), timeout, prov, s.newID())
	if err != nil {
		return Status{}, fmt.Errorf("start reset: %w", err)
	}
	s.bus.Publish(events.Event{Kind: events.Reset, ID: r.ID})
	return s.status(ctx, r)
}

// Get reads reset id; uuid.Nil reads the latest. ErrNotFound when there
// is none.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (Status, error) {
	var (
		r   store.Reset
		err error
	)
	if id == uuid.Nil {
		r, err = s.store.LatestReset(ctx)
	} else {
		r, err = s.store.GetReset(ctx, id)
	}
	if err != nil {
		return Status{}, fmt.Errorf("get reset: %w", err)
	}
	return s.status(ctx, r)
}

func (s *Service) status(ctx context.Context, r store.Reset) (Status, error) {
	st := Status{Reset: r}
	if !r.Active() {
		return st, nil
	}
	lanes, err := s.store.ListHeld(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("reset status: %w", err)
	}
	st.Waiting = lanes
	return st, nil
}
