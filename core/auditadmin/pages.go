package auditadmin

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/admin"
	"berth.dev/core/audit"
	"berth.dev/core/store"
)

// scopeListAuditEvents is the list call's page token scope, followed by
// every filter (Filter's scope), so a token is refused by another method
// or with other filters.
const scopeListAuditEvents = "berth.admin.v1.AuditService/ListAuditEvents"

// eventCursor reads a cursor admin.EncodeAgeCursor wrote (occurred_at,
// id) back into a position.
func eventCursor(cursor []byte) (store.AuditCursor, bool) {
	at, id, ok := admin.DecodeAgeCursor(cursor)
	if !ok {
		return store.AuditCursor{}, false
	}
	return store.AuditCursor{OccurredAt: at, ID: uuid.UUID(id)}, true
}

// eventKeyset pages the trail of f in (occurred_at, id) order.
func eventKeyset(trail *audit.Trail, f store.AuditFilter, scope []string) admin.Keyset[store.AuditEvent, store.AuditCursor] {
	return admin.Keyset[store.AuditEvent, store.AuditCursor]{
		Scope: append([]string{scopeListAuditEvents}, scope...),
		Fetch: func(ctx context.Context, after store.AuditCursor, limit int) ([]store.AuditEvent, error) {
			return trail.List(ctx, f, after, limit)
		},
		Cursor:   func(e store.AuditEvent) ([]byte, error) { return admin.EncodeAgeCursor(e.OccurredAt, e.ID[:]), nil },
		Position: eventCursor,
	}
}
