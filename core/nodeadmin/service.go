package nodeadmin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// Store is what the node and enrollment-token admin logic reads and
// writes (no lifecycle write: nothing here is fenced by the owner epoch).
type Store interface {
	GetNode(ctx context.Context, id uuid.UUID) (store.Node, error)
	ListNodesByAge(ctx context.Context, limit int, after store.NodeCursor, includeRemoved bool) ([]store.Node, error)
	SetNodeState(ctx context.Context, id uuid.UUID, from, to store.NodeState) (store.Node, error)
	NodeHolds(ctx context.Context, nodeID uuid.UUID) (bool, error)
	EnrollmentTokensOfNodes(ctx context.Context, nodeIDs []uuid.UUID) (map[uuid.UUID]string, error)
	CreateRequestedEnrollmentToken(ctx context.Context, requestID uuid.UUID, id string, secretHash []byte, ttl time.Duration) (tok store.EnrollmentToken, created bool, err error)
	ReissueEnrollmentToken(ctx context.Context, requestID uuid.UUID, id string, secretHash []byte) (store.EnrollmentToken, error)
	RevokeActiveEnrollmentToken(ctx context.Context, id string) (store.EnrollmentToken, error)
	ListEnrollmentTokensByAge(ctx context.Context, limit int, after store.TokenCursor, includeInactive bool) ([]store.EnrollmentToken, error)
}

// Service is the logic of berth.admin.v1.NodeService.
type Service struct {
	store         Store
	caFingerprint string
	pages         *admin.PageTokens
	now           func() time.Time
}

// NewService returns the NodeService logic over st. caFingerprint is the
// installation CA's fingerprint ("sha256:<64 lowercase hex digits>",
// nodetls.Fingerprint), which every token pins; pages mints and checks
// the list calls' page tokens (its key must outlive restarts); now is the
// clock that stamps token issuance.
func NewService(st Store, caFingerprint string, pages *admin.PageTokens, now func() time.Time) (*Service, error) {
	switch {
	case st == nil:
		return nil, errors.New("nodeadmin: no store")
	case pages == nil:
		return nil, errors.New("nodeadmin: no page tokens")
	case now == nil:
		return nil, errors.New("nodeadmin: no clock")
	case !validFingerprint(caFingerprint):
		return nil, errors.New("nodeadmin: CA fingerprint is not sha256:<64 lowercase hex digits>")
	}
	return &Service{store: st, caFingerprint: caFingerprint, pages: pages, now: now}, nil
}

// validFingerprint checks the form nodetls gives a certificate
// fingerprint, so a misconfigured Service fails at construction rather
// than at its first token.
func validFingerprint(fp string) bool {
	h, ok := strings.CutPrefix(fp, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// The list calls' page token scopes: the method and every request field
// that shapes the listing, so a token is refused by another method or with
// another filter.
const (
	scopeListTokens = "berth.admin.v1.NodeService/ListEnrollmentTokens"
	scopeListNodes  = "berth.admin.v1.NodeService/ListNodes"
)

func flagScope(name string, v bool) string { return fmt.Sprintf("%s=%t", name, v) }

// cursorLen is the length of an encoded keyset cursor: the creation time
// in Unix microseconds (big-endian) and the 16 bytes of the id.
const cursorLen = 8 + 16

func encodeCursor(createdAt time.Time, id []byte) []byte {
	b := make([]byte, 8, cursorLen)
	binary.BigEndian.PutUint64(b, uint64(createdAt.UnixMicro()))
	return append(b, id...)
}

// decodeCursor splits a cursor that came out of a page token this Service
// minted; any other shape is a bad page token.
func decodeCursor(b []byte) (createdAt time.Time, id []byte, ok bool) {
	if len(b) != cursorLen {
		return time.Time{}, nil, false
	}
	return time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))), b[8:], true
}
