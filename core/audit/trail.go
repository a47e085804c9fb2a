package audit

import (
	"context"

	"berth.dev/core/store"
)

// Lister reads the trail: the store's Reader.
type Lister interface {
	ListAuditEvents(ctx context.Context, f store.AuditFilter, after store.AuditCursor, limit int) ([]store.AuditEvent, error)
}

// Trail reads the audit trail for AuditService.ListAuditEvents.
type Trail struct{ r Lister }

// NewTrail returns the trail over r.
func NewTrail(r Lister) *Trail { return &Trail{r: r} }

// List returns up to limit events of f after position after, oldest
// first (store.Reader.ListAuditEvents: a nil f.End is the database's
// now() - 5 s).
func (t *Trail) List(ctx context.Context, f store.AuditFilter, after store.AuditCursor, limit int) ([]store.AuditEvent, error) {
	return t.r.ListAuditEvents(ctx, f, after, limit)
}
