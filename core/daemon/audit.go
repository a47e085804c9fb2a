package daemon

import (
	"context"

	"berth.dev/core/audit"
)

// startAudit makes the audit trail's Writer, which the admin server hands
// every mutating call's event and a key's refused calls (its queue, drained
// here), and runs the owner's hourly retention sweep.
func (c *core) startAudit() *audit.Writer {
	log := c.log.With("component", "audit")
	w := audit.NewWriter(c.owned.admin, log)
	c.group.addWorker(func(ctx context.Context) error {
		w.Run(ctx)
		return nil
	})
	c.group.addWorker(func(ctx context.Context) error {
		return audit.RunSweeper(ctx, c.owned.owner, c.cfg.AuditRetention, log)
	})
	return w
}
