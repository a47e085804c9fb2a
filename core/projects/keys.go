package projects

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/google/uuid"

	"berth.dev/sandbox/redact"
)

// KeyPrefix starts every project key token: "berth-key-v1.<id>.<secret>",
// the key's uuid and 32 random bytes, each in unpadded base64url. The id
// lets Core find the key by its primary key, never by its secret; the
// admin token's own prefix ("berth-admin-v1.") never collides with it.
const KeyPrefix = "berth-key-v1."

// Key token part lengths: a 16-byte id and a 32-byte secret in unpadded
// base64url.
const (
	keyIDLen     = 22
	keySecretLen = 43
	// KeyTokenLen is the exact length of every key token.
	KeyTokenLen = len(KeyPrefix) + keyIDLen + 1 + keySecretLen
)

// KeyToken is a project key's full text: the secret an agent application
// holds. It prints as "[redacted]" with every fmt verb, through slog and
// through encoding/json; Reveal returns it for the one response that
// shows it, at creation. Core keeps only its SHA-256 (KeyDigest).
type KeyToken struct {
	redact.Redacted
	v *string
	_ [0]func()
}

// Reveal returns the token's text ("" for the zero KeyToken).
func (k KeyToken) Reveal() string {
	if k.v == nil {
		return ""
	}
	return *k.v
}

// NewKeyToken makes a new key: its token, its id (the one in the token)
// and the SHA-256 of the token, the only form the store keeps.
func NewKeyToken() (token KeyToken, id uuid.UUID, digest [sha256.Size]byte, err error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return KeyToken{}, uuid.Nil, digest, err
	}
	id = uuid.New()
	s := KeyPrefix + base64.RawURLEncoding.EncodeToString(id[:]) + "." + base64.RawURLEncoding.EncodeToString(secret[:])
	return KeyToken{v: &s}, id, KeyDigest(s), nil
}

// KeyDigest is the SHA-256 of a key token's full text.
func KeyDigest(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// IsKeyToken reports whether token claims to be a project key (its
// prefix), so the admin token check is not asked about it.
func IsKeyToken(token string) bool { return strings.HasPrefix(token, KeyPrefix) }

// ParseKeyToken returns the key id of a token of NewKeyToken's exact form
// (prefix, a 22-character id, a dot, a 43-character secret, unpadded
// base64url); ok is false for anything else. The length is checked
// before anything is decoded, so a huge header costs nothing, and the
// secret is checked only for its form: the digest comparison decides.
func ParseKeyToken(token string) (id uuid.UUID, ok bool) {
	if len(token) != KeyTokenLen || !IsKeyToken(token) {
		return uuid.Nil, false
	}
	rest := token[len(KeyPrefix):]
	if rest[keyIDLen] != '.' {
		return uuid.Nil, false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest[:keyIDLen])
	if err != nil || len(raw) != 16 {
		return uuid.Nil, false
	}
	secret, err := base64.RawURLEncoding.Strict().DecodeString(rest[keyIDLen+1:])
	if err != nil || len(secret) != 32 {
		return uuid.Nil, false
	}
	id = uuid.UUID(raw)
	if id == uuid.Nil {
		return uuid.Nil, false
	}
	return id, true
}
