package projects

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// KeyStore is what Keys reads and writes: the project a key belongs to,
// and the keys (store.Admin's writes, store.Reader's reads).
type KeyStore interface {
	GetProject(ctx context.Context, id uuid.UUID) (store.Project, error)
	CreateProjectKey(ctx context.Context, k store.NewProjectKey) (store.ProjectKey, bool, error)
	GetProjectKey(ctx context.Context, id uuid.UUID) (store.ProjectKey, error)
	ListProjectKeysByAge(ctx context.Context, projectID uuid.UUID, limit int, after store.AgeCursor) ([]store.ProjectKey, error)
	RevokeProjectKey(ctx context.Context, projectID, id uuid.UUID) (store.ProjectKey, error)
}

// Keys is the administrator's management of project keys. Each change
// commits with a keys_changed notification, which every Core's KeyIndex
// hears (the feed), so nothing is published here.
type Keys struct {
	store KeyStore
	index *KeyIndex
}

// LoadsInto makes Create reload x once a new key has committed, before
// its token is returned: the Core that answered CreateProjectKey then
// authenticates the token from the caller's very next call, instead of
// refusing it UNAUTHENTICATED until its own keys_changed notification
// arrives. Other Cores learn of the key from the notification, as before.
func (k *Keys) LoadsInto(x *KeyIndex) { k.index = x }

// NewKeys returns Keys over st; it refuses a missing st.
func NewKeys(st KeyStore) (*Keys, error) {
	if st == nil {
		return nil, errors.New("projects: no key store")
	}
	return &Keys{store: st}, nil
}

// NewKey is a key to create.
type NewKey struct {
	// RequestID makes a retry idempotent.
	RequestID uuid.UUID
	// TenantID and ProjectID name the project (a key's parent name carries
	// both): a project of another tenant is not found.
	TenantID, ProjectID uuid.UUID
	DisplayName         string
	// ExpireAt is optional and must be in the future (database clock).
	ExpireAt *time.Time
}

// Create creates a key of a live project and returns it with its token;
// the token is the zero KeyToken on a retry (created false), since only
// its digest was kept. A missing, deleted or misparented project is
// errdefs.ErrNotFound.
func (k *Keys) Create(ctx context.Context, req NewKey) (key store.ProjectKey, token KeyToken, err error) {
	p, err := k.store.GetProject(ctx, req.ProjectID)
	if err == nil && (p.DeletedAt != nil || p.TenantID != req.TenantID) {
		err = notFound("project", req.ProjectID)
	}
	if err != nil {
		return store.ProjectKey{}, KeyToken{}, err
	}
	token, id, digest, err := NewKeyToken()
	if err != nil {
		return store.ProjectKey{}, KeyToken{}, errors.New("generate project key failed")
	}
	key, created, err := k.store.CreateProjectKey(ctx, store.NewProjectKey{
		RequestID: req.RequestID, ID: id, ProjectID: p.ID, Digest: digest[:],
		DisplayName: req.DisplayName, ExpireAt: req.ExpireAt,
	})
	if err != nil {
		return store.ProjectKey{}, KeyToken{}, err
	}
	if !created {
		return key, KeyToken{}, nil
	}
	if k.index != nil {
		// A failed reload still returns the token, shown only here: the
		// key exists, and the notification's reload will index it.
		_ = k.index.Load(ctx)
	}
	return key, token, nil
}

// project checks that project id of tenantID exists (deleted or not: its
// keys stay listable and revocable) and belongs to the tenant.
func (k *Keys) project(ctx context.Context, tenantID, id uuid.UUID) error {
	p, err := k.store.GetProject(ctx, id)
	if err != nil {
		return err
	}
	if p.TenantID != tenantID {
		return notFound("project", id)
	}
	return nil
}

// List returns up to limit keys of project id of tenantID after cursor
// after, in creation order, revoked and expired ones included.
func (k *Keys) List(ctx context.Context, tenantID, projectID uuid.UUID, after store.AgeCursor, limit int) ([]store.ProjectKey, error) {
	if err := k.project(ctx, tenantID, projectID); err != nil {
		return nil, err
	}
	return k.store.ListProjectKeysByAge(ctx, projectID, limit, after)
}

// Revoke revokes key id of project projectID of tenantID for good;
// revoking again returns it unchanged. A key of another project is
// errdefs.ErrNotFound.
func (k *Keys) Revoke(ctx context.Context, tenantID, projectID, id uuid.UUID) (store.ProjectKey, error) {
	if err := k.project(ctx, tenantID, projectID); err != nil {
		return store.ProjectKey{}, err
	}
	return k.store.RevokeProjectKey(ctx, projectID, id)
}

// KeyCursor is key's position in List's order.
func KeyCursor(key store.ProjectKey) store.AgeCursor {
	return store.AgeCursor{CreatedAt: key.CreatedAt, ID: key.ID}
}
