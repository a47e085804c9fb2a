package admin

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/projects"
)

// Principal is who a call authenticated as. Only this package makes one
// (the token check, as the call's headers arrive, and for a project key
// the database's verification before the handler); adapters read it with
// PrincipalFrom and pass its Scope to the logic. The zero Principal is
// nobody: its Scope is invalid, so a call that reached a handler without
// authentication fails closed.
type Principal struct {
	admin bool
	// key is the project key the call holds (ID non-nil), verified only
	// once verified is set.
	key      projects.Key
	verified bool
}

// Admin reports whether the call holds the administrator token: full
// access.
func (p Principal) Admin() bool { return p.admin }

// Key returns the verified project key the call holds; ok is false for
// the administrator, nobody and an unverified key.
func (p Principal) Key() (projects.Key, bool) {
	if p.key.ID == uuid.Nil || !p.verified {
		return projects.Key{}, false
	}
	return p.key, true
}

// Scope is what the principal may see: projects.All for the administrator,
// projects.In its project for a verified key, the zero (invalid) Scope for
// nobody and an unverified key.
func (p Principal) Scope() projects.Scope {
	if p.admin {
		return projects.All()
	}
	if k, ok := p.Key(); ok {
		return projects.In(k.ProjectID)
	}
	return projects.Scope{}
}

// Actor names the principal in logs and audit records: "admin",
// "key:<key id>", or "" for nobody. It never carries a secret.
func (p Principal) Actor() string {
	if p.admin {
		return "admin"
	}
	if p.key.ID != uuid.Nil {
		return "key:" + p.key.ID.String()
	}
	return ""
}

type principalKey struct{}

// withPrincipal returns ctx carrying p.
func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal the admin server authenticated for
// the call of ctx; the zero Principal when there is none.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// ScopeFrom is PrincipalFrom(ctx).Scope(): the scope an adapter passes to
// the logic.
func ScopeFrom(ctx context.Context) projects.Scope { return PrincipalFrom(ctx).Scope() }
