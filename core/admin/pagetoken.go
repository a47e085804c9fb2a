package admin

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"log/slog"

	"berth.dev/sandbox/errdefs"
)

// Page tokens are opaque to clients: unpadded base64url of a version byte,
// the list's keyset cursor and an HMAC-SHA256 over the cursor and the
// listing's scope (the method and every request parameter that shapes the
// listing except page_size).
//
// Why a MAC: an admin may read every page anyway, so a forged cursor would
// not reveal anything; the MAC is there so that the cursor encoding stays
// private to Core (clients cannot build or depend on it, and it can change
// without a protocol change), and so that a token that was corrupted,
// truncated, minted by another installation or taken from another method or
// parent is refused as INVALID_ARGUMENT on page_token before it reaches a
// query, as AIP-158 asks, instead of silently listing something else.
// Tokens do not expire: a keyset cursor stays meaningful. They stay valid
// as long as the key does, so Core derives the key from persisted
// installation state to keep tokens valid across restarts.

const (
	pageTokenVersion = 1
	// MinPageTokenKeyBytes is the shortest accepted MAC key.
	MinPageTokenKeyBytes = 32
	// MaxCursorBytes bounds a cursor, and so a token.
	MaxCursorBytes = 512
	maxPageToken   = (1 + MaxCursorBytes + sha256.Size + 2) / 3 * 4
	pageTokenLabel = "berth.admin.v1 page token"
)

// PageTokens mints and checks page tokens under one key. No printer shows
// the key: String, Format and LogValue are redacted, and the key is held
// only inside a func, which fmt's reflection prints as an address and
// encoding/json skips.
type PageTokens struct{ newMAC func() hash.Hash }

// NewPageTokens returns page tokens under key (at least
// MinPageTokenKeyBytes of secret material). The key is copied.
func NewPageTokens(key []byte) (*PageTokens, error) {
	if len(key) < MinPageTokenKeyBytes {
		return nil, errors.New("admin: page token key too short")
	}
	key = bytes.Clone(key)
	return &PageTokens{newMAC: func() hash.Hash { return hmac.New(sha256.New, key) }}, nil
}

const redactedPageTokens = "admin.PageTokens(key redacted)"

// String prints nothing of the key.
func (PageTokens) String() string { return redactedPageTokens }

// Format prints nothing of the key, whatever the verb.
func (PageTokens) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redactedPageTokens)) }

// LogValue prints nothing of the key.
func (PageTokens) LogValue() slog.Value { return slog.StringValue(redactedPageTokens) }

// Encode returns the token for cursor within scope; an empty cursor (no
// further page) is the empty token. It panics on a cursor longer than
// MaxCursorBytes, which is a bug of the list implementation.
func (t *PageTokens) Encode(cursor []byte, scope ...string) string {
	if len(cursor) == 0 {
		return ""
	}
	if len(cursor) > MaxCursorBytes {
		panic("admin: page cursor too long")
	}
	raw := make([]byte, 0, 1+len(cursor)+sha256.Size)
	raw = append(raw, pageTokenVersion)
	raw = append(raw, cursor...)
	raw = append(raw, t.mac(cursor, scope)...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// Decode checks token against scope and returns its cursor; the empty
// token is the first page (nil cursor). A token that is not one this key
// minted for exactly this scope is errdefs.Invalid naming field.
func (t *PageTokens) Decode(field, token string, scope ...string) ([]byte, error) {
	if token == "" {
		return nil, nil
	}
	bad := errdefs.Invalid(field, reasonBadPageToken)
	if len(token) > maxPageToken {
		return nil, bad
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) < 1+1+sha256.Size || raw[0] != pageTokenVersion {
		return nil, bad
	}
	cursor := raw[1 : len(raw)-sha256.Size]
	if !hmac.Equal(raw[len(raw)-sha256.Size:], t.mac(cursor, scope)) {
		return nil, bad
	}
	return append([]byte(nil), cursor...), nil
}

// mac is HMAC-SHA256 over a label, the length-prefixed scope parts and the
// cursor, so no two different (scope, cursor) pairs share an input.
func (t *PageTokens) mac(cursor []byte, scope []string) []byte {
	m := t.newMAC()
	var n [binary.MaxVarintLen64]byte
	m.Write([]byte(pageTokenLabel))
	m.Write(n[:binary.PutUvarint(n[:], uint64(len(scope)))])
	for _, s := range scope {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		m.Write([]byte(s))
	}
	m.Write(cursor)
	return m.Sum(nil)
}
