package turnadmin

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"

	"berth.dev/core/admin"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/turns"
)

// scopeListTurns is the ListTurns page token scope; with the parent in
// the scope a token is refused for another Session. It and the cursor
// encoding (the Turn's submission sequence, 8 bytes big-endian) are part
// of every token handed out: changing either invalidates them.
const scopeListTurns = "berth.admin.v1.TurnService/ListTurns"

// turnKeyset pages ListTurns over t.List for the Session session (named
// parent in the request) in scope, in submission order.
func turnKeyset(t *turns.Service, scope projects.Scope, session uuid.UUID, parent string) admin.Keyset[store.Turn, int64] {
	return admin.Keyset[store.Turn, int64]{
		Scope: []string{scopeListTurns, parent},
		Fetch: func(ctx context.Context, afterSeq int64, limit int) ([]store.Turn, error) {
			page, err := t.List(ctx, scope, session, afterSeq, limit)
			if err != nil {
				return nil, fmt.Errorf("list turns: %w", err)
			}
			return page, nil
		},
		Cursor: func(t store.Turn) ([]byte, error) { return binary.BigEndian.AppendUint64(nil, uint64(t.Seq)), nil },
		Position: func(cursor []byte) (int64, bool) {
			if len(cursor) != 8 {
				return 0, false
			}
			return int64(binary.BigEndian.Uint64(cursor)), true
		},
	}
}
