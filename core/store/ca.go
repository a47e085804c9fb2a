package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// CA is the installation CA as stored. The store keeps bytes only: the
// private key arrives encrypted (AES-GCM, bound by the caller to the
// installation) and leaves the same way; the store never sees the key or
// the encryption key.
type CA struct {
	CertificatePEM string
	KeyCiphertext  []byte
	KeyNonce       []byte
	CreatedAt      time.Time
}

// String identifies the CA without its key material, so formatting a CA
// never prints the ciphertext.
func (ca CA) String() string {
	return fmt.Sprintf("store.CA(created %s, key ciphertext redacted)", ca.CreatedAt.Format(time.RFC3339))
}

// GoString is String, for %#v.
func (ca CA) GoString() string { return ca.String() }

// SaveCA stores the installation CA once. Saving the very same CA again
// (a retry after a lost response) returns the stored one; any other CA
// after the first is ErrExists, and the caller loads the stored one
// instead: two Cores racing at first start end up with one CA.
func (s *Store) SaveCA(ctx context.Context, ca CA) (CA, error) {
	const op = "save CA"
	row, err := s.q.InsertCA(ctx, db.InsertCAParams{
		CertificatePEM: ca.CertificatePEM,
		KeyCiphertext:  ca.KeyCiphertext,
		KeyNonce:       ca.KeyNonce,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		row, err = s.q.GetCA(ctx)
		if err == nil && (row.CertificatePEM != ca.CertificatePEM ||
			!bytes.Equal(row.KeyCiphertext, ca.KeyCiphertext) || !bytes.Equal(row.KeyNonce, ca.KeyNonce)) {
			return CA{}, fmt.Errorf("%s: another CA is stored: %w", op, errdefs.ErrExists)
		}
	}
	if err != nil {
		return CA{}, wrap(op, err)
	}
	return caFromRow(row), nil
}

// LoadCA returns the stored installation CA, ErrNotFound before SaveCA.
func (s *Store) LoadCA(ctx context.Context) (CA, error) {
	row, err := s.q.GetCA(ctx)
	if err != nil {
		return CA{}, wrap("load CA", err)
	}
	return caFromRow(row), nil
}

func caFromRow(r db.InstallationCA) CA {
	return CA{CertificatePEM: r.CertificatePEM, KeyCiphertext: r.KeyCiphertext, KeyNonce: r.KeyNonce, CreatedAt: r.CreatedAt}
}
