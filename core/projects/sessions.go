package projects

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// SessionReader reads one Session, unscoped or within one project: the
// store's Reader (and every authority that embeds it).
type SessionReader interface {
	GetSession(ctx context.Context, id uuid.UUID) (store.SessionBundle, error)
	GetSessionInProject(ctx context.Context, projectID, id uuid.UUID) (store.SessionBundle, error)
}

// GetSession reads Session id as scope sees it: any Session for All, and
// for In(project) only one of that project, with the project in the
// read's WHERE, so another project's Session is the same
// errdefs.ErrNotFound as a missing one. It is the one place that turns a
// Scope into a Session read; core/sessions and core/turns call it first in
// every scoped entry (a Session's project never changes, so a later write
// by id acts on the Session this read saw).
func GetSession(ctx context.Context, r SessionReader, scope Scope, id uuid.UUID) (store.SessionBundle, error) {
	if err := scope.Check(); err != nil {
		return store.SessionBundle{}, err
	}
	if project, ok := scope.Project(); ok {
		return r.GetSessionInProject(ctx, project, id)
	}
	return r.GetSession(ctx, id)
}

// Visible refuses a Session scope does not see, as GetSession does, but
// reads nothing for All: the administrator's write by id that follows
// finds a missing Session itself (errdefs.ErrNotFound), so the read would
// be a second round trip on every call of the hot path (SubmitTurn,
// GetTurn, StreamTurnOutput). For In(project) it is GetSession's one
// scoped read.
func Visible(ctx context.Context, r SessionReader, scope Scope, id uuid.UUID) error {
	if err := scope.Check(); err != nil {
		return err
	}
	if _, ok := scope.Project(); !ok {
		return nil
	}
	_, err := GetSession(ctx, r, scope, id)
	return err
}
