package daemon

import (
	"context"

	"berth.dev/core/audit"
)

// startAudit makes the audit trail's Writer, which the admin server hands
// every mutating call's event and a key's refused calls (its queue, drained
// here), and runs the owner's hourly retention sweep, after recording
// the retention when it differs from the last recorded (audit.retention).
func (c *core) startAudit() *audit.Writer {
	log := c.log.With("component", "audit")
	w := audit.NewWriter(c.owned.admin, log)
	c.group.addWorker(func(ctx context.Context) error {
		w.Run(ctx)
		return nil
	})
	c.group.addWorker(func(ctx context.Context) error {
		// The trail says how long it keeps events, when that changes.
		if _, err := audit.RecordRetention(ctx, c.owned.reader, c.owned.admin, c.cfg.AuditRetention); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "audit retention not recorded", "err", err)
		}
		return audit.RunSweeper(ctx, c.owned.owner, c.cfg.AuditRetention, log)
	})
	return w
}
