package enrollment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"berth.dev/platform/nodetls"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/redact"

	"berth.dev/core/store"
)

// The bounds of an enrollment token's lifetime.
const (
	// DefaultTokenTTL is the lifetime of a token whose creation request
	// leaves its lifetime unset.
	DefaultTokenTTL = time.Hour
	// MinTokenTTL is the shortest lifetime: a token must live long enough
	// to be carried to a host.
	MinTokenTTL = time.Minute
	// MaxTokenTTL is the longest lifetime, nodetls's bound.
	MaxTokenTTL = nodetls.MaxTokenTTL
)

// TokenStore is what Tokens reads and writes (no lifecycle write: nothing
// here is fenced by the owner epoch).
type TokenStore interface {
	CreateRequestedEnrollmentToken(ctx context.Context, requestID uuid.UUID, id string, secretHash []byte, ttl time.Duration) (tok store.EnrollmentToken, created bool, err error)
	ReissueEnrollmentToken(ctx context.Context, requestID uuid.UUID, id string, secretHash []byte) (store.EnrollmentToken, error)
	RevokeActiveEnrollmentToken(ctx context.Context, id string) (store.EnrollmentToken, error)
	ListEnrollmentTokensByAge(ctx context.Context, limit int, after store.TokenCursor, includeInactive bool) ([]store.EnrollmentToken, error)
}

// TokenText is an enrollment token's text: a secret until the token is
// used or expires. It prints as "[redacted]" (redact.String) with every
// fmt verb, through slog and through encoding/json, so a TokenText (or a
// struct holding one) that reaches a log or an error shows nothing; Reveal
// it only to put it in the answer to the creation request.
type TokenText struct{ redact.String }

func newTokenText(s string) TokenText { return TokenText{redact.NewString(s)} }

// IssuedToken is a token as Tokens.Create returns it: the record and,
// this once, its text.
type IssuedToken struct {
	Token store.EnrollmentToken
	Text  TokenText
}

// Tokens issues, lists and revokes the enrollment tokens that Service
// consumes.
type Tokens struct {
	store         TokenStore
	caFingerprint string
	now           func() time.Time
}

// NewTokens returns the enrollment token logic over st. caFingerprint is
// the installation CA's fingerprint ("sha256:<64 lowercase hex digits>",
// nodetls.Fingerprint), which every token pins; now is the clock that
// stamps token issuance.
func NewTokens(st TokenStore, caFingerprint string, now func() time.Time) (*Tokens, error) {
	switch {
	case st == nil:
		return nil, errors.New("enrollment tokens: no store")
	case now == nil:
		return nil, errors.New("enrollment tokens: no clock")
	case !validFingerprint(caFingerprint):
		return nil, errors.New("enrollment tokens: CA fingerprint is not sha256:<64 lowercase hex digits>")
	}
	return &Tokens{store: st, caFingerprint: caFingerprint, now: now}, nil
}

// validFingerprint checks the form nodetls gives a certificate
// fingerprint, so misconfigured Tokens fail at construction rather than at
// their first token.
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

// Create creates a single-use token that lives ttl (from MinTokenTTL to
// MaxTokenTTL, by the database clock; outside them errdefs.Invalid naming
// "ttl") and pins the installation CA, and returns its text.
//
// requestID (the caller's retry identity; uuid.Nil is refused as an
// invalid "request_id") makes it idempotent: a retry with the same
// requestID and ttl never creates a second token. Core cannot show lost
// text again, so the retry gives the same token a new secret and returns
// the new text, and the earlier text stops working. That holds while the
// token is unused and unrevoked (even once it has expired: the answer
// then shows it expired); a retry after the token was used or revoked is
// errdefs.ErrFailedPrecondition, and one with another ttl is
// errdefs.ErrExists.
func (t *Tokens) Create(ctx context.Context, requestID uuid.UUID, ttl time.Duration) (IssuedToken, error) {
	const op = "create enrollment token"
	if ttl < MinTokenTTL || ttl > MaxTokenTTL {
		return IssuedToken{}, errdefs.Invalid("ttl", fmt.Sprintf("must be between %s and %s", MinTokenTTL, MaxTokenTTL))
	}
	// Expiry is the database's (now() + ttl); NewToken's own, by the Go
	// clock, is not used.
	text, id, secretHash, _, err := nodetls.NewToken(t.caFingerprint, t.now(), ttl)
	if err != nil {
		return IssuedToken{}, fmt.Errorf("%s: %w", op, err)
	}
	tok, created, err := t.store.CreateRequestedEnrollmentToken(ctx, requestID, id, secretHash, ttl)
	if err != nil {
		return IssuedToken{}, fmt.Errorf("%s: %w", op, err)
	}
	if created {
		return IssuedToken{Token: tok, Text: newTokenText(text)}, nil
	}
	// A retry: the request's token gets a new secret.
	text, secretHash, err = nodetls.ReissueToken(t.caFingerprint, tok.ID)
	if err != nil {
		return IssuedToken{}, fmt.Errorf("%s: %w", op, err)
	}
	tok, err = t.store.ReissueEnrollmentToken(ctx, requestID, tok.ID, secretHash)
	if err != nil {
		return IssuedToken{}, fmt.Errorf("%s: %w", op, err)
	}
	return IssuedToken{Token: tok, Text: newTokenText(text)}, nil
}

// List returns up to limit (1 to store.MaxPageSize+1) tokens after
// position after (the zero cursor is the start), oldest first: creation
// time, then id. Without
// includeInactive only tokens that can still enroll a node are listed. No
// token text or secret hash is ever returned.
func (t *Tokens) List(ctx context.Context, after store.TokenCursor, limit int, includeInactive bool) ([]store.EnrollmentToken, error) {
	page, err := t.store.ListEnrollmentTokensByAge(ctx, limit, after, includeInactive)
	if err != nil {
		return nil, fmt.Errorf("list enrollment tokens: %w", err)
	}
	return page, nil
}

// Revoke makes the unused token id unusable. A revoked or expired token
// comes back unchanged; a used one is errdefs.ErrFailedPrecondition (it
// stays as it is, so its node can still recover a lost enrollment
// answer); an unknown one is errdefs.ErrNotFound.
func (t *Tokens) Revoke(ctx context.Context, id string) (store.EnrollmentToken, error) {
	tok, err := t.store.RevokeActiveEnrollmentToken(ctx, id)
	if err != nil {
		return store.EnrollmentToken{}, fmt.Errorf("revoke enrollment token: %w", err)
	}
	return tok, nil
}
