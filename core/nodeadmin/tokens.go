package nodeadmin

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodetls"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// The bounds of an enrollment token's lifetime.
const (
	// DefaultTokenTTL is the lifetime of a token whose request leaves ttl
	// unset.
	DefaultTokenTTL = time.Hour
	// MinTokenTTL is the shortest lifetime: a token must live long enough
	// to be carried to a host.
	MinTokenTTL = time.Minute
	// MaxTokenTTL is the longest lifetime, nodetls's bound.
	MaxTokenTTL = nodetls.MaxTokenTTL
)

// TokenText is an enrollment token's text: a secret until the token is
// used or expires. It prints as "<redacted>" with every fmt verb, through
// slog (LogValue) and through encoding/json (which slog's JSON handler
// uses for a struct holding one), so a TokenText (or a struct holding one)
// that reaches a log or an error shows nothing; Reveal it only to put it
// in the response.
//
// The text sits behind a pointer: fmt prints a struct by reflection,
// without asking its fields to format themselves, when the struct is in an
// unexported field or reached by a mismatched verb, and there a pointer
// shows only its address. A TokenText is not comparable.
type TokenText struct {
	v *string
	_ [0]func()
}

func newTokenText(s string) TokenText { return TokenText{v: &s} }

// Reveal returns the text ("" for the zero TokenText).
func (t TokenText) Reveal() string {
	if t.v == nil {
		return ""
	}
	return *t.v
}

const redacted = "<redacted>"

// String is the redacted form.
func (TokenText) String() string { return redacted }

// GoString is the redacted form.
func (TokenText) GoString() string { return redacted }

// Format prints the redacted form for every verb.
func (TokenText) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue is the redacted form.
func (TokenText) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON is the redacted form: a TokenText never marshals.
func (TokenText) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// IssuedToken is a token as CreateEnrollmentToken returns it: the record
// and, this once, its text.
type IssuedToken struct {
	Token store.EnrollmentToken
	Text  TokenText
}

// CreateEnrollmentToken creates a single-use token that lives ttl (from
// MinTokenTTL to MaxTokenTTL, by the database clock) and pins the
// installation CA, and returns its text.
//
// requestID (a canonical UUID) makes it idempotent, as node.proto says:
// a retry with the same requestID and ttl never creates a second token.
// Core cannot show lost text again, so the retry gives the same token a
// new secret and returns the new text, and the earlier text stops
// working. That holds while the token is unused and unrevoked (even once
// it has expired: the answer then shows it expired); a retry after the
// token was used or revoked is errdefs.ErrFailedPrecondition, and one
// with another ttl is errdefs.ErrExists.
func (s *Service) CreateEnrollmentToken(ctx context.Context, requestID string, ttl time.Duration) (IssuedToken, error) {
	const op = "create enrollment token"
	if err := admin.ValidateRequestID("request_id", requestID); err != nil {
		return IssuedToken{}, err
	}
	if ttl < MinTokenTTL || ttl > MaxTokenTTL {
		return IssuedToken{}, errdefs.Invalid("ttl", fmt.Sprintf("must be between %s and %s", MinTokenTTL, MaxTokenTTL))
	}
	reqID, err := uuid.Parse(requestID)
	if err != nil { // ValidateRequestID accepted it: unreachable
		return IssuedToken{}, errdefs.Invalid("request_id", "must be a canonical UUID")
	}
	// Expiry is the database's (now() + ttl); NewToken's own, by the Go
	// clock, is not used.
	text, id, secretHash, _, err := nodetls.NewToken(s.caFingerprint, s.now(), ttl)
	if err != nil {
		return IssuedToken{}, fmt.Errorf("%s: %w", op, err)
	}
	tok, created, err := s.store.CreateRequestedEnrollmentToken(ctx, reqID, id, secretHash, ttl)
	if err != nil {
		return IssuedToken{}, fmt.Errorf("%s: %w", op, err)
	}
	if created {
		return IssuedToken{Token: tok, Text: newTokenText(text)}, nil
	}
	// A retry: the request's token gets a new secret.
	text, secretHash, err = nodetls.ReissueToken(s.caFingerprint, tok.ID)
	if err != nil {
		return IssuedToken{}, fmt.Errorf("%s: %w", op, err)
	}
	tok, err = s.store.ReissueEnrollmentToken(ctx, reqID, tok.ID, secretHash)
	if err != nil {
		return IssuedToken{}, fmt.Errorf("%s: %w", op, err)
	}
	return IssuedToken{Token: tok, Text: newTokenText(text)}, nil
}

// ListEnrollmentTokens returns one page of tokens, oldest first, and the
// page token of the next page ("" on the last). pageSize and pageToken are
// the request's (admin.PageSize's rules); without showInactive only
// tokens that can still enroll a node are listed. No token text or secret
// hash is ever returned.
func (s *Service) ListEnrollmentTokens(ctx context.Context, pageSize int32, pageToken string, showInactive bool) ([]store.EnrollmentToken, string, error) {
	return admin.Paginate(ctx, s.pages, pageSize, pageToken, admin.Keyset[store.EnrollmentToken, store.TokenCursor]{
		Scope: []string{scopeListTokens, flagScope("show_inactive", showInactive)},
		Fetch: func(ctx context.Context, after store.TokenCursor, limit int) ([]store.EnrollmentToken, error) {
			page, err := s.store.ListEnrollmentTokensByAge(ctx, limit, after, showInactive)
			if err != nil {
				return nil, fmt.Errorf("list enrollment tokens: %w", err)
			}
			return page, nil
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
	})
}

// RevokeEnrollmentToken makes the unused token name
// ("enrollmentTokens/{token}") unusable. A revoked or expired token comes
// back unchanged; a used one is errdefs.ErrFailedPrecondition (it stays
// as it is, so its node can still recover a lost enrollment answer).
func (s *Service) RevokeEnrollmentToken(ctx context.Context, name string) (store.EnrollmentToken, error) {
	ids, err := admin.ValidateName("name", name, admin.EnrollmentTokenName)
	if err != nil {
		return store.EnrollmentToken{}, err
	}
	tok, err := s.store.RevokeActiveEnrollmentToken(ctx, ids[0])
	if err != nil {
		return store.EnrollmentToken{}, fmt.Errorf("revoke enrollment token: %w", err)
	}
	return tok, nil
}
