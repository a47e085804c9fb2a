package store

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// hashLen is the length of every hash the store keeps: SHA-256.
const hashLen = 32

// ErrEnrollmentRejected is the one answer to an enrollment token that
// cannot be consumed: unknown, wrong secret, expired, revoked or used by
// another key. Its text and class are the same for every reason, so a
// caller learns nothing about which check failed.
var ErrEnrollmentRejected = fmt.Errorf("enrollment token rejected: %w", errdefs.ErrInvalid)

// EnrollmentToken is a token's public record; the secret's hash is never
// returned.
type EnrollmentToken struct {
	ID        string
	CreatedAt time.Time
	ExpiresAt time.Time
	// Expired is ExpiresAt compared with the database clock when read.
	Expired   bool
	RevokedAt *time.Time
	// UsedAt, NodeID and PublicKeyHash are set together by the enrollment
	// that consumed the token.
	UsedAt        *time.Time
	NodeID        *uuid.UUID
	PublicKeyHash []byte
}

// ConsumeResult is a successful enrollment's claim on a token.
type ConsumeResult struct {
	// NodeID is the node the token enrolled: the one passed in, or on a
	// replay the one the first consumption recorded.
	NodeID uuid.UUID
	// Replayed reports that the token had already been consumed by the same
	// public key, whose enrollment response was presumably lost.
	Replayed bool
}

// CreateEnrollmentToken stores a token's id and the SHA-256 of its secret
// (never the token), expiring ttl from now by the database clock.
// ErrExists when the id is taken.
func (s *Admin) CreateEnrollmentToken(ctx context.Context, id string, secretHash []byte, ttl time.Duration) (EnrollmentToken, error) {
	const op = "create enrollment token"
	if len(secretHash) != hashLen {
		return EnrollmentToken{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("secret_hash", "must be a SHA-256"))
	}
	micros, err := ttlMicros("ttl", ttl)
	if err != nil {
		return EnrollmentToken{}, fmt.Errorf("%s: %w", op, err)
	}
	row, err := s.q.CreateEnrollmentToken(ctx, db.CreateEnrollmentTokenParams{ID: id, SecretHash: secretHash, TTLMicros: micros})
	if err != nil {
		return EnrollmentToken{}, wrap(op, err)
	}
	return tokenFromRow(db.GetEnrollmentTokenRow(row)), nil
}

// GetEnrollmentToken returns one token's public record.
func (s *Reader) GetEnrollmentToken(ctx context.Context, id string) (EnrollmentToken, error) {
	row, err := s.q.GetEnrollmentToken(ctx, id)
	if err != nil {
		return EnrollmentToken{}, wrap("get enrollment token", err)
	}
	return tokenFromRow(row), nil
}

// ListEnrollmentTokens returns up to pageSize tokens with ids after after
// ("" for the first page), in id order. next is the cursor for the
// following page, "" when there is none; keyset pagination stays correct
// while tokens are created and revoked between pages.
func (s *Reader) ListEnrollmentTokens(ctx context.Context, pageSize int, after string) (page []EnrollmentToken, next string, err error) {
	const op = "list enrollment tokens"
	n, err := pageSizeParam(pageSize)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.q.ListEnrollmentTokens(ctx, db.ListEnrollmentTokensParams{After: after, PageSize: n + 1})
	if err != nil {
		return nil, "", wrap(op, err)
	}
	if len(rows) > pageSize {
		rows = rows[:pageSize]
		next = rows[pageSize-1].ID
	}
	page = make([]EnrollmentToken, len(rows))
	for i, r := range rows {
		page[i] = tokenFromRow(db.GetEnrollmentTokenRow(r))
	}
	return page, next, nil
}

// RevokeEnrollmentToken makes a token unusable from now on, for first use
// and for replays alike; revoking twice keeps the first time. ErrNotFound
// for an unknown id.
func (s *Admin) RevokeEnrollmentToken(ctx context.Context, id string) (EnrollmentToken, error) {
	row, err := s.q.RevokeEnrollmentToken(ctx, id)
	if err != nil {
		return EnrollmentToken{}, wrap("revoke enrollment token", err)
	}
	return tokenFromRow(db.GetEnrollmentTokenRow(row)), nil
}

// TokenCursor is a position in ListEnrollmentTokensByAge: the creation
// time and id of the last token of a page. The zero cursor is the start.
type TokenCursor struct {
	CreatedAt time.Time
	ID        string
}

// CreateRequestedEnrollmentToken stores the token made by the admin
// request requestID, as CreateEnrollmentToken does. It is idempotent per
// request: when requestID already made a token, nothing is inserted and
// that token comes back with created false, provided it was made with the
// same ttl (expires_at and created_at are written by one statement, so the
// stored lifetime is exactly the requested one); a different ttl is
// ErrExists, a different request under a reused id. The returned token
// may meanwhile have been used, revoked or expired; the caller decides.
func (s *Admin) CreateRequestedEnrollmentToken(ctx context.Context, requestID uuid.UUID, id string, secretHash []byte, ttl time.Duration) (tok EnrollmentToken, created bool, err error) {
	const op = "create requested enrollment token"
	if requestID == uuid.Nil {
		return EnrollmentToken{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("request_id", "must not be the nil UUID"))
	}
	if len(secretHash) != hashLen {
		return EnrollmentToken{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("secret_hash", "must be a SHA-256"))
	}
	micros, err := ttlMicros("ttl", ttl)
	if err != nil {
		return EnrollmentToken{}, false, fmt.Errorf("%s: %w", op, err)
	}
	row, err := s.q.CreateRequestedEnrollmentToken(ctx, db.CreateRequestedEnrollmentTokenParams{
		ID: id, SecretHash: secretHash, TTLMicros: micros, RequestID: requestID,
	})
	if err == nil {
		return tokenFromRow(db.GetEnrollmentTokenRow(row)), true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return EnrollmentToken{}, false, wrap(op, err)
	}
	// The request made a token before: this is a retry.
	existing, err := s.q.GetEnrollmentTokenByRequest(ctx, requestID)
	if err != nil {
		return EnrollmentToken{}, false, wrap(op, err)
	}
	tok = tokenFromRow(db.GetEnrollmentTokenRow(existing))
	if tok.ExpiresAt.Sub(tok.CreatedAt) != time.Duration(micros)*time.Microsecond {
		return EnrollmentToken{}, false, fmt.Errorf("%s: request id reused with another ttl: %w", op, errdefs.ErrExists)
	}
	return tok, false, nil
}

// ReissueEnrollmentToken replaces the secret hash of token id, which the
// admin request requestID made, so that the token text shown earlier stops
// working and new text with the same id works instead. It changes nothing
// else (expiry included). A token that was used or revoked keeps its hash
// and the answer is ErrFailedPrecondition; an id the request did not make
// is ErrNotFound.
//
// The guarded update and ConsumeEnrollmentToken's row lock serialize, so
// a consumption either sees the new hash or wins and makes this refuse.
func (s *Admin) ReissueEnrollmentToken(ctx context.Context, requestID uuid.UUID, id string, secretHash []byte) (EnrollmentToken, error) {
	const op = "reissue enrollment token"
	if len(secretHash) != hashLen {
		return EnrollmentToken{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("secret_hash", "must be a SHA-256"))
	}
	row, err := s.q.ReissueEnrollmentToken(ctx, db.ReissueEnrollmentTokenParams{SecretHash: secretHash, ID: id, RequestID: requestID})
	if err == nil {
		return tokenFromRow(db.GetEnrollmentTokenRow(row)), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return EnrollmentToken{}, wrap(op, err)
	}
	existing, err := s.q.GetEnrollmentTokenByRequest(ctx, requestID)
	if err != nil {
		return EnrollmentToken{}, wrap(op, err)
	}
	if existing.ID != id {
		return EnrollmentToken{}, fmt.Errorf("%s: %w", op, errdefs.ErrNotFound)
	}
	return EnrollmentToken{}, fmt.Errorf("%s: %w", op, ErrTokenSpent)
}

// The refusals of enrollment token changes, each with a fixed reason and a
// message that tells the operator what to do.
var (
	// ErrTokenSpent refuses a retried token creation whose token was used
	// or revoked since.
	ErrTokenSpent error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "enrollment_token_spent",
		"the enrollment token of this request was used or revoked: create a new one with a new request_id")
	// ErrTokenUsed refuses revoking a token a node enrolled with.
	ErrTokenUsed error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "enrollment_token_used",
		"the enrollment token was used by its node and cannot be revoked: retire or remove the node instead")
)

// RevokeActiveEnrollmentToken revokes token id if it can still enroll a
// node (unused, unrevoked, unexpired by the database clock). A token that
// is already revoked or has expired comes back unchanged; a used token is
// ErrFailedPrecondition and stays as it is, so a node whose enrollment
// answer was lost can still recover it. ErrNotFound for an unknown id.
// (RevokeEnrollmentToken, unlike this, also ends the replays of a used
// token.)
func (s *Admin) RevokeActiveEnrollmentToken(ctx context.Context, id string) (EnrollmentToken, error) {
	const op = "revoke active enrollment token"
	row, err := s.q.RevokeActiveEnrollmentToken(ctx, id)
	if err == nil {
		return tokenFromRow(db.GetEnrollmentTokenRow(row)), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return EnrollmentToken{}, wrap(op, err)
	}
	current, err := s.q.GetEnrollmentToken(ctx, id)
	if err != nil {
		return EnrollmentToken{}, wrap(op, err)
	}
	tok := tokenFromRow(current)
	if tok.UsedAt != nil {
		return EnrollmentToken{}, fmt.Errorf("%s: %w", op, ErrTokenUsed)
	}
	return tok, nil
}

// ListEnrollmentTokensByAge returns up to limit (1 to MaxPageSize+1)
// tokens after cursor after (the zero cursor for the start), oldest first
// (ties by id). Without includeInactive only tokens that can still enroll
// a node are listed (unused, unrevoked, unexpired by the database clock).
func (s *Reader) ListEnrollmentTokensByAge(ctx context.Context, limit int, after TokenCursor, includeInactive bool) ([]EnrollmentToken, error) {
	return listPage("list enrollment tokens by age", limit, func(n int32) ([]db.ListEnrollmentTokensByAgeRow, error) {
		return s.q.ListEnrollmentTokensByAge(ctx, db.ListEnrollmentTokensByAgeParams{
			FirstPage: after.CreatedAt.IsZero(), AfterCreatedAt: after.CreatedAt, AfterID: after.ID,
			IncludeInactive: includeInactive, PageSize: n,
		})
	}, func(r db.ListEnrollmentTokensByAgeRow) EnrollmentToken {
		return tokenFromRow(db.GetEnrollmentTokenRow(r))
	})
}

// EnrollmentTokensOfNodes returns the id of the token that enrolled each
// of nodeIDs, for the nodes a token enrolled (the first used, should
// several name one node).
func (s *Reader) EnrollmentTokensOfNodes(ctx context.Context, nodeIDs []uuid.UUID) (map[uuid.UUID]string, error) {
	if len(nodeIDs) > MaxPageSize {
		return nil, fmt.Errorf("enrollment tokens of nodes: %w", errdefs.Invalid("node_ids", fmt.Sprintf("at most %d", MaxPageSize)))
	}
	rows, err := s.q.EnrollmentTokensOfNodes(ctx, nodeIDs)
	if err != nil {
		return nil, wrap("enrollment tokens of nodes", err)
	}
	out := make(map[uuid.UUID]string, len(rows))
	for _, r := range rows {
		out[r.NodeID] = r.ID
	}
	return out, nil
}

// ConsumeEnrollmentToken spends token id on the enrollment of nodeID with
// the public key whose SHA-256 is publicKeyHash. It succeeds once, for an
// unrevoked, unexpired (by the database clock), unused token whose secret
// hash equals secretHash, recording the node id and key hash.
//
// A token already consumed by the same key hash (with the right secret and
// not revoked) answers again with the recorded node id and Replayed set,
// even after expiry: the binding already exists and the replay grants
// nothing new, while refusing it would strand a node whose response was
// lost. Every other case is ErrEnrollmentRejected, the same text and class
// whichever check failed.
//
// The row is read FOR UPDATE, so concurrent consumptions of one token
// serialize, and the hashes are compared in Go with crypto/subtle. Constant
// time guards only the comparison itself: the secret is 32 random bytes and
// the database sees only its hash, and an unknown id answers faster than a
// known one, which reveals ids (which are not secret) but nothing of any
// secret.
func (s *Admin) ConsumeEnrollmentToken(ctx context.Context, id string, secretHash []byte, nodeID uuid.UUID, publicKeyHash []byte) (ConsumeResult, error) {
	const op = "consume enrollment token"
	switch {
	case nodeID == uuid.Nil:
		return ConsumeResult{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("node_id", "must not be the nil UUID"))
	case len(publicKeyHash) != hashLen:
		return ConsumeResult{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("public_key_hash", "must be a SHA-256"))
	case len(secretHash) != hashLen:
		return ConsumeResult{}, fmt.Errorf("%s: %w", op, ErrEnrollmentRejected)
	}
	var res ConsumeResult
	err := s.inTx(ctx, func(q *db.Queries) error {
		tok, err := q.LockEnrollmentToken(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrEnrollmentRejected
		}
		if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare(tok.SecretHash, secretHash) != 1 || tok.Revoked {
			return ErrEnrollmentRejected
		}
		if tok.UsedAt != nil {
			if tok.NodeID == nil || !bytes.Equal(tok.PublicKeyHash, publicKeyHash) {
				return ErrEnrollmentRejected
			}
			res = ConsumeResult{NodeID: *tok.NodeID, Replayed: true}
			return nil
		}
		if tok.Expired {
			return ErrEnrollmentRejected
		}
		n, err := q.MarkEnrollmentTokenUsed(ctx, db.MarkEnrollmentTokenUsedParams{ID: id, NodeID: nodeID, PublicKeyHash: publicKeyHash})
		if err != nil {
			return err
		}
		if n != 1 {
			return ErrEnrollmentRejected
		}
		res = ConsumeResult{NodeID: nodeID}
		return nil
	})
	if err != nil {
		return ConsumeResult{}, wrap(op, err)
	}
	return res, nil
}

func tokenFromRow(r db.GetEnrollmentTokenRow) EnrollmentToken {
	return EnrollmentToken{
		ID:            r.ID,
		CreatedAt:     r.CreatedAt,
		ExpiresAt:     r.ExpiresAt,
		Expired:       r.Expired,
		RevokedAt:     r.RevokedAt,
		UsedAt:        r.UsedAt,
		NodeID:        r.NodeID,
		PublicKeyHash: r.PublicKeyHash,
	}
}
