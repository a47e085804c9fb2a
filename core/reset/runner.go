package reset

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/store"
	"berth.dev/sandbox/errdefs"
)

// Store is what the Runner reads and writes: the owner-bound store. It
// holds no allocation write (Writes): a reset never releases, abandons or
// cleans anything itself.
type Store interface {
	ActiveReset(ctx context.Context) (store.Reset, error)
	ResetPage(ctx context.Context, r store.Reset) ([]store.ResetSession, error)
	ArchiveForReset(ctx context.Context, r store.Reset, sess store.ResetSession, eventID uuid.UUID) (store.Termination, error)
	MoveReset(ctx context.Context, id uuid.UUID, from, to store.ResetPhase) error
	ListHeld(ctx context.Context) ([]store.HeldLane, error)
	RecordResetProgress(ctx context.Context, id uuid.UUID, held, offline int64) error
	FinalizeReset(ctx context.Context, r store.Reset, eventID uuid.UUID) (store.Finalized, error)
	FailExpiredReset(ctx context.Context, r store.Reset, eventID uuid.UUID) (bool, error)
}

// Writes lists the store methods this package alone calls: the reset's
// own rows (and, inside them, the archives and the final clearing). Its
// test fails when another package of the core module calls one.
var Writes = []string{"StartReset", "ArchiveForReset", "MoveReset", "RecordResetProgress", "FinalizeReset", "FailExpiredReset"}

// Defaults of Config.
const (
	// DefaultInterval is the wait between passes while a reset is active
	// (a reset waits on cleanup the lifecycle workers do; a pass is one
	// indexed read when nothing is active).
	DefaultInterval = 5 * time.Second
	// RestoreTimeout bounds the restore of the committed provider after a
	// failed finalization.
	RestoreTimeout = 30 * time.Second
)

// ErrOwnerStop is Run's end when a failed finalization could not restore
// the committed provider: admission is closed, and Core must stop so the
// lease passes on and the next owner resumes the reset.
var ErrOwnerStop = errors.New("owner failure: reset restore failed")

// Admission is closed on an owner stop (core/sessions.Service).
type Admission interface{ CloseAdmission() }

// Config configures a Runner.
type Config struct {
	Store Store
	// Events wakes a pass (events.Reset) and hears the Sessions a reset
	// archived (events.Terminated) and the empty provider
	// (events.Generation).
	Events *events.Bus
	// Drain runs change while no lifecycle worker of any lane runs
	// (core/lifecycle's Coordinator.Restart over every node and the
	// direct lane), outside any transaction.
	Drain func(ctx context.Context, change func() error) error
	// Restore restores the committed provider after a failed
	// finalization: it re-reads the committed generation and announces it
	// again. nil: RestoreCommitted over Reader.
	Restore func(ctx context.Context) error
	// Reader reads the committed generation for the default Restore.
	Reader interface {
		SeenGeneration(ctx context.Context) (store.GenerationSeen, error)
	}
	Admission Admission
	Interval  time.Duration
	NewID     func() uuid.UUID
	Log       *slog.Logger
}

// Runner advances the active deployment reset on the owner.
type Runner struct {
	cfg Config
}

// NewRunner returns a Runner for cfg.
func NewRunner(cfg Config) (*Runner, error) {
	switch {
	case cfg.Store == nil || cfg.Drain == nil || cfg.NewID == nil:
		return nil, errors.New("reset: runner needs a store, a drain and an id source")
	case cfg.Restore == nil && cfg.Reader == nil:
		return nil, errors.New("reset: runner needs a restore or a reader")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{cfg: cfg}
	if r.cfg.Restore == nil {
		r.cfg.Restore = r.restoreCommitted
	}
	return r, nil
}

// restoreCommitted reads the committed generation and announces it
// again, so the nodes and the direct set serve it (the drain's new
// workers already run).
func (r *Runner) restoreCommitted(ctx context.Context) error {
	if _, err := r.cfg.Reader.SeenGeneration(ctx); err != nil {
		return err
	}
	r.cfg.Events.Publish(events.Event{Kind: events.Generation})
	return nil
}

// Run passes at once, then on every events.Reset and every Interval,
// until ctx ends (nil) or an owner stop (ErrOwnerStop).
func (r *Runner) Run(ctx context.Context) error {
	var wake <-chan struct{}
	if r.cfg.Events != nil {
		sub := r.cfg.Events.Subscribe(events.Any(events.Reset))
		defer sub.Close()
		wake = sub.Ready()
	}
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		err := r.Pass(ctx)
		if errors.Is(err, ErrOwnerStop) {
			return err
		}
		if err != nil && ctx.Err() == nil {
			r.cfg.Log.WarnContext(ctx, "reset pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-wake:
		}
	}
}

// Pass advances the active reset as far as it can now: past its deadline
// it fails; archiving, it archives page after page until none is left;
// draining, it records the held snapshot and at zero finalizes. Without
// an active reset it does nothing.
func (r *Runner) Pass(ctx context.Context) error {
	rs, err := r.cfg.Store.ActiveReset(ctx)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	log := r.cfg.Log.With("reset", rs.ID)
	if rs.Expired {
		failed, err := r.cfg.Store.FailExpiredReset(ctx, rs, r.cfg.NewID())
		if err != nil {
			return err
		}
		if failed {
			log.WarnContext(ctx, "reset failed: its deadline passed with resources still held; admission reopens",
				"held", rs.Held, "held_offline", rs.HeldOffline)
		}
		return nil
	}
	switch rs.Phase {
	case store.ResetArchiving:
		if err := r.archive(ctx, rs); err != nil {
			return err
		}
		rs.Phase = store.ResetDraining
		fallthrough
	case store.ResetDraining:
		lanes, err := r.cfg.Store.ListHeld(ctx)
		if err != nil {
			return err
		}
		held, offline := store.Held(lanes)
		if err := r.cfg.Store.RecordResetProgress(ctx, rs.ID, held, offline); err != nil {
			return err
		}
		if held > 0 {
			return nil
		}
		if err := r.cfg.Store.MoveReset(ctx, rs.ID, store.ResetDraining, store.ResetFinalizing); err != nil {
			return err
		}
		rs.Phase = store.ResetFinalizing
		fallthrough
	case store.ResetFinalizing:
		return r.finalize(ctx, log, rs)
	}
	return nil
}

// archive archives every Session of rs's pages, then moves it to
// draining. The drain of ctx is checked between Sessions, never inside a
// transaction.
func (r *Runner) archive(ctx context.Context, rs store.Reset) error {
	for {
		page, err := r.cfg.Store.ResetPage(ctx, rs)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return r.cfg.Store.MoveReset(ctx, rs.ID, store.ResetArchiving, store.ResetDraining)
		}
		for _, sess := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			term, err := r.cfg.Store.ArchiveForReset(ctx, rs, sess, r.cfg.NewID())
			if err != nil {
				return err
			}
			if term.SessionID != uuid.Nil {
				r.cfg.Events.Publish(events.Terminated(term.SessionID, term.SettledTurns, term.CancelRequested)...)
			}
		}
		if rs, err = r.cfg.Store.ActiveReset(ctx); err != nil {
			return err
		}
		if rs.Phase != store.ResetArchiving {
			return nil
		}
	}
}

// finalize drains every lifecycle lane and, while they are drained,
// clears the deployment in one transaction; then publishes the empty
// provider. A drain or transaction failure restores the committed
// provider; a failed restore is an owner stop.
func (r *Runner) finalize(ctx context.Context, log *slog.Logger, rs store.Reset) error {
	var fin store.Finalized
	err := r.cfg.Drain(ctx, func() error {
		var err error
		fin, err = r.cfg.Store.FinalizeReset(ctx, rs, r.cfg.NewID())
		return err
	})
	switch {
	case err == nil:
		// Nothing after the commit can fail: the announcement only wakes
		// the node manager and the direct set, which read the empty
		// deployment.
		r.cfg.Events.Publish(events.Event{Kind: events.Generation})
		log.InfoContext(ctx, "reset done: the deployment is empty", "empty_generation", fin.Reset.EmptyGeneration,
			"sessions_archived", fin.Reset.SessionsArchived, "nodes_retired", len(fin.RetiredNodes))
		return nil
	case errors.Is(err, store.ErrResetHeld):
		return nil // something is held again: the reset drains on
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RestoreTimeout)
	defer cancel()
	if rerr := r.cfg.Restore(rctx); rerr != nil {
		if r.cfg.Admission != nil {
			r.cfg.Admission.CloseAdmission()
		}
		log.ErrorContext(ctx, "owner failure: reset restore failed; admission closed and the owner stops",
			"finalize_err", err, "restore_err", rerr)
		return errors.Join(ErrOwnerStop, err, rerr)
	}
	return err
}
