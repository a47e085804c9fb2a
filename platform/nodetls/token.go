package nodetls

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

const (
	// TokenPrefix is the first field of an enrollment token.
	TokenPrefix = "berth-enroll-v1"
	// MaxTokenTTL bounds an enrollment token's lifetime.
	MaxTokenTTL = 7 * 24 * time.Hour

	tokenIDBytes     = 16
	tokenSecretBytes = 32
)

var secretEncoding = base64.RawURLEncoding.Strict()

// Token is a parsed enrollment token. It holds the secret; String and Format
// redact it for every verb, no error of this package contains it, and the
// secret is hidden from fmt's reflection too (see hidden).
type Token struct {
	id            string
	secret        hidden[[tokenSecretBytes]byte]
	caFingerprint string
}

// NewToken creates an enrollment token that pins the CA with fingerprint
// caFingerprint and expires at now+ttl (0 < ttl <= MaxTokenTTL). The token
// text is
//
//	berth-enroll-v1.<id>.<secret>.<ca-fingerprint-hex>
//
// with id 16 random bytes as lowercase hex, secret 32 random bytes as
// unpadded base64url, and the fingerprint's 64 hex digits. It is handed to
// the operator once. Core stores only id, secretHash (the SHA-256 of the
// secret) and expires; it enforces expiry and single use.
func NewToken(caFingerprint string, now time.Time, ttl time.Duration) (token, id string, secretHash []byte, expires time.Time, err error) {
	fpHex, err := fingerprintHex(caFingerprint)
	if err != nil {
		return "", "", nil, time.Time{}, err
	}
	if now.IsZero() {
		return "", "", nil, time.Time{}, errors.New("nodetls: zero token issuance time")
	}
	if ttl <= 0 || ttl > MaxTokenTTL {
		return "", "", nil, time.Time{}, fmt.Errorf("nodetls: token lifetime %s is outside (0, %s]", ttl, MaxTokenTTL)
	}
	var idb [tokenIDBytes]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", "", nil, time.Time{}, errors.New("nodetls: token randomness unavailable")
	}
	id = hex.EncodeToString(idb[:])
	token, secretHash, err = withNewSecret(id, fpHex)
	if err != nil {
		return "", "", nil, time.Time{}, err
	}
	return token, id, secretHash, now.Add(ttl), nil
}

// ReissueToken gives the existing token id a new secret, pinning the CA
// with fingerprint caFingerprint: the text of a token Core issued before,
// whose text is lost (Core keeps only the secret's hash and cannot show it
// again). Core replaces the stored hash with secretHash, so the earlier
// text stops working; expiry and single use stay Core's.
func ReissueToken(caFingerprint, id string) (token string, secretHash []byte, err error) {
	fpHex, err := fingerprintHex(caFingerprint)
	if err != nil {
		return "", nil, err
	}
	if !isLowerHex(id, tokenIDBytes*2) {
		return "", nil, errors.New("nodetls: token id is not 32 lowercase hex digits")
	}
	return withNewSecret(id, fpHex)
}

// withNewSecret returns the text of token id with a fresh random secret and
// the secret's SHA-256.
func withNewSecret(id, fpHex string) (token string, secretHash []byte, err error) {
	var secret [tokenSecretBytes]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", nil, errors.New("nodetls: token randomness unavailable")
	}
	sum := sha256.Sum256(secret[:])
	token = strings.Join([]string{TokenPrefix, id, secretEncoding.EncodeToString(secret[:]), fpHex}, ".")
	return token, sum[:], nil
}

// ParseToken parses enrollment token text strictly: exactly four
// dot-separated fields, the exact prefix, a 32-digit lowercase hex id, a
// canonical unpadded base64url encoding of 32 bytes, and 64 lowercase hex
// digits of CA fingerprint. Surrounding white space is an error (callers
// reading a file or a terminal trim first). Errors never echo the input.
func ParseToken(s string) (Token, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return Token{}, errors.New("nodetls: malformed enrollment token: want four dot-separated fields")
	}
	if parts[0] != TokenPrefix {
		return Token{}, errors.New("nodetls: malformed enrollment token: unknown prefix or version")
	}
	if !isLowerHex(parts[1], tokenIDBytes*2) {
		return Token{}, errors.New("nodetls: malformed enrollment token: bad id")
	}
	var secret [tokenSecretBytes]byte
	if len(parts[2]) != secretEncoding.EncodedLen(tokenSecretBytes) {
		return Token{}, errors.New("nodetls: malformed enrollment token: bad secret")
	}
	n, err := secretEncoding.Decode(secret[:], []byte(parts[2]))
	if err != nil || n != tokenSecretBytes || secretEncoding.EncodeToString(secret[:]) != parts[2] {
		return Token{}, errors.New("nodetls: malformed enrollment token: bad secret")
	}
	if !isLowerHex(parts[3], sha256.Size*2) {
		return Token{}, errors.New("nodetls: malformed enrollment token: bad CA fingerprint")
	}
	return Token{id: parts[1], secret: hide(secret), caFingerprint: "sha256:" + parts[3]}, nil
}

// ID is the token's public id, Core's lookup key.
func (t Token) ID() string { return t.id }

// CAFingerprint is the pinned CA fingerprint, "sha256:<hex>", for
// PinnedConfig.
func (t Token) CAFingerprint() string { return t.caFingerprint }

// SecretHash returns the SHA-256 of the token's secret: the value Core
// stored when it issued the token, for the store to compare. The hash does
// not reveal the secret.
func (t Token) SecretHash() []byte {
	if t.secret == nil {
		return nil
	}
	secret := t.secret()
	sum := sha256.Sum256(secret[:])
	return sum[:]
}

// Matches reports, in constant time, whether the SHA-256 of the token's
// secret equals secretHash (as NewToken returned it and Core stored it).
func (t Token) Matches(secretHash []byte) bool {
	if t.secret == nil || len(secretHash) != sha256.Size {
		return false
	}
	secret := t.secret()
	sum := sha256.Sum256(secret[:])
	return subtle.ConstantTimeCompare(sum[:], secretHash) == 1
}

// String is the token with its secret redacted.
func (t Token) String() string {
	if t.id == "" {
		return "nodetls.Token(<zero>)"
	}
	return TokenPrefix + "." + t.id + ".<redacted>." + strings.TrimPrefix(t.caFingerprint, "sha256:")
}

// Format prints String for every verb (%v, %+v, %#v, %s, %q, %x, ...), so
// the secret never reaches fmt output.
func (t Token) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

// GoString is String.
func (t Token) GoString() string { return t.String() }

// LogValue is String, so slog's handlers never reach the secret either.
func (t Token) LogValue() slog.Value { return slog.StringValue(t.String()) }
