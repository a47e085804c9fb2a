package nodeadmin

import (
	"context"
	"encoding/hex"
	"fmt"

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

// tokenKeyset pages ListEnrollmentTokens over tokens.List, oldest first.
func tokenKeyset(tokens *enrollment.Tokens, showInactive bool) admin.Keyset[store.EnrollmentToken, store.TokenCursor] {
	return admin.Keyset[store.EnrollmentToken, store.TokenCursor]{
		Scope: []string{scopeListTokens, admin.FlagScope("show_inactive", showInactive)},
		Fetch: func(ctx context.Context, after store.TokenCursor, limit int) ([]store.EnrollmentToken, error) {
			return tokens.List(ctx, after, limit, showInactive)
		},
		Cursor: func(tok store.EnrollmentToken) ([]byte, error) {
			id, err := hex.DecodeString(tok.ID)
			if err != nil || len(id) != 16 {
				return nil, fmt.Errorf("list enrollment tokens: stored token id is not 32 hex digits")
			}
			return admin.EncodeAgeCursor(tok.CreatedAt, id), nil
		},
		Position: func(cursor []byte) (store.TokenCursor, bool) {
			createdAt, id, ok := admin.DecodeAgeCursor(cursor)
			return store.TokenCursor{CreatedAt: createdAt, ID: hex.EncodeToString(id)}, ok
		},
	}
}

// nodeKeyset pages ListNodes over registry.List, in enrollment order.
func nodeKeyset(registry *nodes.Registry, showRemoved bool) admin.Keyset[nodes.Node, store.NodeCursor] {
	return admin.Keyset[nodes.Node, store.NodeCursor]{
		Scope: []string{scopeListNodes, admin.FlagScope("show_removed", showRemoved)},
		Fetch: func(ctx context.Context, after store.NodeCursor, limit int) ([]nodes.Node, error) {
			return registry.List(ctx, after, limit, showRemoved)
		},
		Cursor: func(n nodes.Node) ([]byte, error) { return admin.EncodeAgeCursor(n.CreatedAt, n.ID[:]), nil },
		Position: func(cursor []byte) (store.NodeCursor, bool) {
			createdAt, id, ok := admin.DecodeAgeCursor(cursor)
			if !ok {
				return store.NodeCursor{}, false
			}
			return store.NodeCursor{CreatedAt: createdAt, ID: uuid.UUID(id)}, true
		},
	}
}
