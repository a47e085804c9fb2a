package nodeadmin

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/admin"
	"berth.dev/core/enrollment"
	"berth.dev/core/nodes"
	"berth.dev/core/store"
)

// The list calls' page token scopes: the method and every request field
// that shapes the listing, so a token is refused by another method or with
// another filter. Tokens minted before stay valid only while these and the
// cursor encoding below stay as they are.
const (
	scopeListTokens = "berth.admin.v1.NodeService/ListEnrollmentTokens"
	scopeListNodes  = "berth.admin.v1.NodeService/ListNodes"
)

func flagScope(name string, v bool) string { return fmt.Sprintf("%s=%t", name, v) }

// tokenKeyset pages ListEnrollmentTokens over tokens.List, oldest first.
func tokenKeyset(tokens *enrollment.Tokens, showInactive bool) admin.Keyset[store.EnrollmentToken, store.TokenCursor] {
	return admin.Keyset[store.EnrollmentToken, store.TokenCursor]{
		Scope: []string{scopeListTokens, flagScope("show_inactive", showInactive)},
		Fetch: func(ctx context.Context, after store.TokenCursor, limit int) ([]store.EnrollmentToken, error) {
			return tokens.List(ctx, after, limit, showInactive)
		},
		Cursor: func(tok store.EnrollmentToken) ([]byte, error) {
			id, err := hex.DecodeString(tok.ID)
			if err != nil || len(id) != 16 {
				return nil, fmt.Errorf("list enrollment tokens: stored token id is not 32 hex digits")
			}
			return encodeCursor(tok.CreatedAt, id), nil
		},
		Position: func(cursor []byte) (store.TokenCursor, bool) {
			createdAt, id, ok := decodeCursor(cursor)
			return store.TokenCursor{CreatedAt: createdAt, ID: hex.EncodeToString(id)}, ok
		},
	}
}

// nodeKeyset pages ListNodes over registry.List, in enrollment order.
func nodeKeyset(registry *nodes.Registry, showRemoved bool) admin.Keyset[nodes.Node, store.NodeCursor] {
	return admin.Keyset[nodes.Node, store.NodeCursor]{
		Scope: []string{scopeListNodes, flagScope("show_removed", showRemoved)},
		Fetch: func(ctx context.Context, after store.NodeCursor, limit int) ([]nodes.Node, error) {
			return registry.List(ctx, after, limit, showRemoved)
		},
		Cursor: func(n nodes.Node) ([]byte, error) { return encodeCursor(n.CreatedAt, n.ID[:]), nil },
		Position: func(cursor []byte) (store.NodeCursor, bool) {
			createdAt, id, ok := decodeCursor(cursor)
			if !ok {
				return store.NodeCursor{}, false
			}
			return store.NodeCursor{CreatedAt: createdAt, ID: uuid.UUID(id)}, true
		},
	}
}

// cursorLen is the length of an encoded keyset cursor: the creation time
// in Unix microseconds (big-endian) and the 16 bytes of the id.
const cursorLen = 8 + 16

func encodeCursor(createdAt time.Time, id []byte) []byte {
	b := make([]byte, 8, cursorLen)
	binary.BigEndian.PutUint64(b, uint64(createdAt.UnixMicro()))
	return append(b, id...)
}

// decodeCursor splits a cursor that came out of a page token this adapter
// minted; any other shape is a bad page token.
func decodeCursor(b []byte) (createdAt time.Time, id []byte, ok bool) {
	if len(b) != cursorLen {
		return time.Time{}, nil, false
	}
	return time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))), b[8:], true
}
