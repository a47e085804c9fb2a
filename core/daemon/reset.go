package daemon

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/lifecycle"
	"berth.dev/core/reset"
)

// startReset makes the deployment reset logic (the admin API serves it)
// and runs the owner's reset runner. The runner's drain is the
// coordinator's Restart over every lane the node manager serves and the
// direct lane; a failed restore after a failed finalization closes
// admission and ends the runner with reset.ErrOwnerStop, which stops
// Core (the errgroup), so the lease passes on and the next owner resumes
// the reset.
func (c *core) startReset() error {
	svc, err := reset.NewService(c.owned.readOwner(), c.bus, uuid.New, c.cfg.ResetMinTimeout)
	if err != nil {
		return err
	}
	c.resets = svc
	runner, err := reset.NewRunner(reset.Config{
		Store:  c.owned.readOwner(),
		Events: c.bus,
		Drain: func(ctx context.Context, change func() error) error {
			return c.coordinator.Restart(ctx, append(c.manager.Nodes(), lifecycle.DirectLane), change)
		},
		Reader:    c.owned.reader,
		Admission: c.sessions,
		NewID:     uuid.New,
		Log:       c.log.With("component", "reset"),
	})
	if err != nil {
		return err
	}
	c.group.addWorker(runner.Run)
	return nil
}
