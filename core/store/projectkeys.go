package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// KeysChangedEvent is the kind of the event a key's creation or
// revocation queues (its id: the key): core/events' KeysChanged, which
// tells every Core to reload its key index at once.
const KeysChangedEvent = "keys_changed"

// ProjectKey is a project API key's record: never its token, only the
// token's SHA-256 (Digest), which Core compares in constant time.
type ProjectKey struct {
	ID          uuid.UUID
	ProjectID   uuid.UUID
	TenantID    uuid.UUID
	Digest      []byte
	DisplayName string
	RequestID   uuid.UUID
	CreatedAt   time.Time
	// ExpireAt is when it stops authenticating (nil: never), on the
	// database clock; RevokedAt when it was revoked (nil: it was not).
	ExpireAt  *time.Time
	RevokedAt *time.Time
	// Expired is whether ExpireAt had passed when the key was read, on the
	// database clock.
	Expired bool
}

// LiveKey is a key that may authenticate now: what the key index holds
// and what VerifyProjectKey answers.
type LiveKey struct {
	ID        uuid.UUID
	ProjectID uuid.UUID
	TenantID  uuid.UUID
	Digest    []byte
	ExpireAt  *time.Time
}

// NewProjectKey is a key to create: its id, the SHA-256 of its token and
// what the administrator asked for.
type NewProjectKey struct {
	RequestID   uuid.UUID
	ID          uuid.UUID
	ProjectID   uuid.UUID
	Digest      []byte
	DisplayName string
	// ExpireAt is optional; it must be after the creation (the table's
	// CHECK, on the database clock: a past time is invalid).
	ExpireAt *time.Time
}

// CreateProjectKey creates a key of a live project (ErrProjectNotFound
// for a missing or deleted one). It is idempotent by RequestID: a retry
// returns the key the first call made (created false); the same request
// id with another project, name or expiry is ErrExists. The commit
// queues KeysChangedEvent.
func (s *Admin) CreateProjectKey(ctx context.Context, k NewProjectKey) (key ProjectKey, created bool, err error) {
	const op = "create project key"
	switch {
	case k.RequestID == uuid.Nil:
		return ProjectKey{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("request_id", "must not be the nil UUID"))
	case k.ID == uuid.Nil:
		return ProjectKey{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("id", "must not be the nil UUID"))
	case len(k.Digest) != sha256.Size:
		return ProjectKey{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("digest", "must be a SHA-256 digest"))
	}
	if k.DisplayName != "" {
		if err := validTenantName("display_name", k.DisplayName); err != nil {
			return ProjectKey{}, false, fmt.Errorf("%s: %w", op, err)
		}
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		if k.ExpireAt != nil {
			now, err := q.DatabaseNow(ctx)
			if err != nil {
				return err
			}
			if !k.ExpireAt.After(now) {
				return errdefs.Invalid("expire_time", "must be in the future")
			}
		}
		row, err := q.InsertProjectKey(ctx, db.InsertProjectKeyParams{
			ID: k.ID, ProjectID: k.ProjectID, Digest: k.Digest, DisplayName: k.DisplayName,
			RequestID: k.RequestID, ExpireAt: k.ExpireAt,
		})
		if err == nil {
			key, created = projectKeyFromRow(row.ProjectKey, row.Expired), true
			return q.NotifyEvent(ctx, db.NotifyEventParams{Kind: KeysChangedEvent, ID: row.ProjectKey.ID.String()})
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		prev, err := q.GetProjectKeyByRequestID(ctx, k.RequestID)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrProjectNotFound
		}
		if err != nil {
			return err
		}
		if p := prev.ProjectKey; p.ProjectID != k.ProjectID || p.DisplayName != k.DisplayName || !sameTime(p.ExpireAt, k.ExpireAt) {
			return fmt.Errorf("request id already used by another request: %w", errdefs.ErrExists)
		}
		key = projectKeyFromRow(prev.ProjectKey, prev.Expired)
		return nil
	})
	if err != nil {
		return ProjectKey{}, false, wrap(op, err)
	}
	return key, created, nil
}

// sameTime reports whether two optional times are both unset or equal to
// the microsecond (PostgreSQL's precision).
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

// RevokeProjectKey revokes key id of project projectID for good; revoking
// again changes nothing. A key of another project is ErrNotFound, like a
// missing one. The commit queues KeysChangedEvent.
func (s *Admin) RevokeProjectKey(ctx context.Context, projectID, id uuid.UUID) (ProjectKey, error) {
	var key ProjectKey
	err := s.inTx(ctx, func(q *db.Queries) error {
		row, err := q.RevokeProjectKey(ctx, db.RevokeProjectKeyParams{ID: id, ProjectID: projectID})
		if err != nil {
			return err
		}
		key = projectKeyFromRow(row.ProjectKey, row.Expired)
		return q.NotifyEvent(ctx, db.NotifyEventParams{Kind: KeysChangedEvent, ID: row.ProjectKey.ID.String()})
	})
	if err != nil {
		return ProjectKey{}, wrap("revoke project key", err)
	}
	return key, nil
}

// GetProjectKey returns key id, revoked and expired ones too; ErrNotFound
// when there is none.
func (s *Reader) GetProjectKey(ctx context.Context, id uuid.UUID) (ProjectKey, error) {
	row, err := s.q.GetProjectKey(ctx, id)
	if err != nil {
		return ProjectKey{}, wrap("get project key", err)
	}
	return projectKeyFromRow(row.ProjectKey, row.Expired), nil
}

// ListProjectKeysByAge pages project's keys after the keyset position
// after, in creation order (ties by id), revoked and expired ones
// included.
func (s *Reader) ListProjectKeysByAge(ctx context.Context, projectID uuid.UUID, limit int, after AgeCursor) ([]ProjectKey, error) {
	const op = "list project keys by age"
	n, err := limitParam(limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.q.ListProjectKeysByAge(ctx, db.ListProjectKeysByAgeParams{
		ProjectID: projectID, AfterCreatedAt: after.CreatedAt, AfterID: after.ID, PageSize: n,
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	out := make([]ProjectKey, len(rows))
	for i, r := range rows {
		out[i] = projectKeyFromRow(r.ProjectKey, r.Expired)
	}
	return out, nil
}

// LiveProjectKeys returns every key that may authenticate now, on the
// database clock: not revoked, not expired, of a live project. It is one
// scan of the keys; the key index loads it.
func (s *Reader) LiveProjectKeys(ctx context.Context) ([]LiveKey, error) {
	rows, err := s.q.LiveProjectKeys(ctx)
	if err != nil {
		return nil, wrap("live project keys", err)
	}
	out := make([]LiveKey, len(rows))
	for i, r := range rows {
		out[i] = LiveKey{ID: r.ID, ProjectID: r.ProjectID, TenantID: r.TenantID, Digest: r.Digest, ExpireAt: r.ExpireAt}
	}
	return out, nil
}

// VerifyProjectKey returns key id if it may authenticate now
// (LiveProjectKeys' rule, decided by the database in one primary-key
// read); ErrNotFound when it may not: unknown, revoked, expired or of a
// deleted project.
func (s *Reader) VerifyProjectKey(ctx context.Context, id uuid.UUID) (LiveKey, error) {
	r, err := s.q.VerifyProjectKey(ctx, id)
	if err != nil {
		return LiveKey{}, wrap("verify project key", err)
	}
	return LiveKey{ID: r.ID, ProjectID: r.ProjectID, TenantID: r.TenantID, Digest: r.Digest, ExpireAt: r.ExpireAt}, nil
}

func projectKeyFromRow(r db.ProjectKey, expired bool) ProjectKey {
	return ProjectKey{
		ID: r.ID, ProjectID: r.ProjectID, TenantID: r.TenantID, Digest: r.Digest, DisplayName: r.DisplayName,
		RequestID: r.RequestID, CreatedAt: r.CreatedAt, ExpireAt: r.ExpireAt, RevokedAt: r.RevokedAt, Expired: expired,
	}
}
