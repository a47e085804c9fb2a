package admin

import (
	"context"

	"berth.dev/core/projects"
)

// Principal is who a call authenticated as. Only this package makes one
// (the token check, as the call's headers arrive); adapters read it with
// PrincipalFrom and pass its Scope to the logic. The zero Principal is
// nobody: its Scope is invalid, so a call that reached a handler without
// authentication fails closed.
type Principal struct {
	admin bool
}

// Admin reports whether the call holds the administrator token: full
// access.
func (p Principal) Admin() bool { return p.admin }

// Scope is what the principal may see: projects.All for the administrator,
// the zero (invalid) Scope for nobody.
func (p Principal) Scope() projects.Scope {
	if p.admin {
		return projects.All()
	}
	return projects.Scope{}
}

// Actor names the principal in logs and audit records: "admin", or
// "" for nobody. It never carries a secret.
func (p Principal) Actor() string {
	if p.admin {
		return "admin"
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
