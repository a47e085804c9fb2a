package sessionadmin

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/admin"
	"berth.dev/core/projects"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
)

// The list calls' page token scopes: the method and every request field
// that shapes the listing, so a token is refused by another method or
// with another filter. They and the cursor encoding are part of every
// token already handed out: changing either invalidates them.
const (
	scopeListSessions    = "berth.admin.v1.SessionService/ListSessions"
	scopeListAllocations = "berth.admin.v1.AllocationService/ListAllocations"
)

// encodeCursor and decodeCursor are admin's creation-order cursor over a
// store.AgeCursor.
func encodeCursor(c store.AgeCursor) []byte { return admin.EncodeAgeCursor(c.CreatedAt, c.ID[:]) }

func decodeCursor(b []byte) (store.AgeCursor, bool) {
	createdAt, id, ok := admin.DecodeAgeCursor(b)
	if !ok {
		return store.AgeCursor{}, false
	}
	return store.AgeCursor{CreatedAt: createdAt, ID: uuid.UUID(id)}, true
}

// sessionKeyset pages ListSessions over svc.List in scope, in creation
// order; the token is bound to the project filter as the request named it
// (project; without one the scope is the one tokens had before the filter
// existed, so they stay valid).
func sessionKeyset(svc *sessions.Service, scope projects.Scope, project string, showDeleted bool) admin.Keyset[store.SessionBundle, store.AgeCursor] {
	tokenScope := []string{scopeListSessions, admin.FlagScope("show_deleted", showDeleted)}
	if project != "" {
		tokenScope = append(tokenScope, "project="+project)
	}
	return admin.Keyset[store.SessionBundle, store.AgeCursor]{
		Scope: tokenScope,
		Fetch: func(ctx context.Context, after store.AgeCursor, limit int) ([]store.SessionBundle, error) {
			return svc.List(ctx, scope, after, limit, showDeleted)
		},
		Cursor:   func(b store.SessionBundle) ([]byte, error) { return encodeCursor(sessions.Cursor(b)), nil },
		Position: decodeCursor,
	}
}

// allocationKeyset pages ListAllocations over svc.ListAllocations in
// scope, in creation order; the token is bound to the project filter as
// sessionKeyset's is.
func allocationKeyset(svc *sessions.Service, scope projects.Scope, project string, showReleased bool) admin.Keyset[store.SessionAllocation, store.AgeCursor] {
	tokenScope := []string{scopeListAllocations, admin.FlagScope("show_released", showReleased)}
	if project != "" {
		tokenScope = append(tokenScope, "project="+project)
	}
	return admin.Keyset[store.SessionAllocation, store.AgeCursor]{
		Scope: tokenScope,
		Fetch: func(ctx context.Context, after store.AgeCursor, limit int) ([]store.SessionAllocation, error) {
			return svc.ListAllocations(ctx, scope, after, limit, showReleased)
		},
		Cursor: func(a store.SessionAllocation) ([]byte, error) {
			return encodeCursor(sessions.AllocationCursor(a)), nil
		},
		Position: decodeCursor,
	}
}
