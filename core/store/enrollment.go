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
func (s *Store) CreateEnrollmentToken(ctx context.Context, id string, secretHash []byte, ttl time.Duration) (EnrollmentToken, error) {
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
func (s *Store) GetEnrollmentToken(ctx context.Context, id string) (EnrollmentToken, error) {
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
func (s *Store) ListEnrollmentTokens(ctx context.Context, pageSize int, after string) (page []EnrollmentToken, next string, err error) {
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
func (s *Store) RevokeEnrollmentToken(ctx context.Context, id string) (EnrollmentToken, error) {
	row, err := s.q.RevokeEnrollmentToken(ctx, id)
	if err != nil {
		return EnrollmentToken{}, wrap("revoke enrollment token", err)
	}
	return tokenFromRow(db.GetEnrollmentTokenRow(row)), nil
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
func (s *Store) ConsumeEnrollmentToken(ctx context.Context, id string, secretHash []byte, nodeID uuid.UUID, publicKeyHash []byte) (ConsumeResult, error) {
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
	err := s.InTx(ctx, func(q *db.Queries) error {
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
