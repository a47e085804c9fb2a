package sessionadmin

import (
	"github.com/google/uuid"

	"berth.dev/core/admin"
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
