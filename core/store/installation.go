package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// errNotClaimed answers calls that need the installation before its claim.
var errNotClaimed = fmt.Errorf("installation not claimed: %w", errdefs.ErrNotFound)

// Installation is Core's stable identity, shared by every Core that ever
// runs against the database.
type Installation struct {
	ID uuid.UUID
	// PublicURL is the configured address that Runtimes and nodes reach
	// Core at; Core derives every address it hands out from it, never from
	// request headers.
	PublicURL string
	CreatedAt time.Time
	// OwnerEpoch is the newest owner epoch issued (0 before the first).
	OwnerEpoch uint64
}

// ClaimInstallation returns the installation identity, creating it with
// newID and publicURL when the database has none. newID is used only that
// first time; afterwards the stored identity (and public URL) comes back
// unchanged whatever is passed, so every Core of one database shares one
// identity and a retried first claim is harmless.
func (s *Store) ClaimInstallation(ctx context.Context, newID uuid.UUID, publicURL string) (Installation, error) {
	if newID == uuid.Nil {
		return Installation{}, errdefs.Invalid("installation.id", "must not be the nil UUID")
	}
	row, err := s.q.InsertInstallation(ctx, db.InsertInstallationParams{ID: newID, PublicURL: publicURL})
	if errors.Is(err, pgx.ErrNoRows) {
		// Another Core created it first; its row is committed, since an
		// insert that conflicts waits for the other transaction to end.
		row, err = s.q.GetInstallation(ctx)
	}
	if err != nil {
		return Installation{}, wrap("claim installation", err)
	}
	return installationFromRow(row), nil
}

// GetInstallation returns the installation identity, ErrNotFound before
// the first claim.
func (s *Reader) GetInstallation(ctx context.Context) (Installation, error) {
	row, err := s.q.GetInstallation(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return Installation{}, fmt.Errorf("get installation: %w", errNotClaimed)
	}
	if err != nil {
		return Installation{}, wrap("get installation", err)
	}
	return installationFromRow(row), nil
}

// NextOwnerEpoch issues a new owner epoch: it increments the installation's
// epoch atomically and returns the new value, so concurrent callers never
// share an epoch and each is larger than every epoch issued before it.
// ErrNotFound before the installation is claimed.
func (s *Store) NextOwnerEpoch(ctx context.Context) (uint64, error) {
	epoch, err := s.q.NextOwnerEpoch(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("next owner epoch: %w", errNotClaimed)
	}
	if err != nil {
		return 0, wrap("next owner epoch", err)
	}
	return uint64(epoch), nil
}

func installationFromRow(r db.Installation) Installation {
	return Installation{ID: r.ID, PublicURL: r.PublicURL, CreatedAt: r.CreatedAt, OwnerEpoch: uint64(r.OwnerEpoch)}
}
