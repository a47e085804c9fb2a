package sessionadmin

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"

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

func flagScope(name string, v bool) string { return fmt.Sprintf("%s=%t", name, v) }

// cursorLen is the length of an encoded keyset cursor: the creation time
// in Unix microseconds (big-endian; the database keeps microseconds) and
// the 16 bytes of the id.
const cursorLen = 8 + 16

func encodeCursor(c store.AgeCursor) []byte {
	b := make([]byte, 8, cursorLen)
	binary.BigEndian.PutUint64(b, uint64(c.CreatedAt.UnixMicro()))
	return append(b, c.ID[:]...)
}

func decodeCursor(b []byte) (store.AgeCursor, bool) {
	if len(b) != cursorLen {
		return store.AgeCursor{}, false
	}
	return store.AgeCursor{
		CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))),
		ID:        uuid.UUID(b[8:]),
	}, true
}
