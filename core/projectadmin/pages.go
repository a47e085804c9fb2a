package projectadmin

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/admin"
	"berth.dev/core/projects"
	"berth.dev/core/store"
)

// The list calls' page token scopes: the method and every request field
// that shapes the listing (ListProjects' parent), so a token is refused by
// another method or for another tenant. Tokens minted before stay valid
// only while these and the cursor encoding below stay as they are.
const (
	scopeListTenants  = "berth.admin.v1.ProjectService/ListTenants"
	scopeListProjects = "berth.admin.v1.ProjectService/ListProjects"
	// scopeListProjectKeys holds the parent too: a token is refused for
	// another project.
	scopeListProjectKeys = "berth.admin.v1.ProjectService/ListProjectKeys"
)

// ageCursor reads a cursor admin.EncodeAgeCursor wrote (creation time,
// id) back into a by-age position.
func ageCursor(cursor []byte) (store.AgeCursor, bool) {
	createdAt, id, ok := admin.DecodeAgeCursor(cursor)
	if !ok {
		return store.AgeCursor{}, false
	}
	return store.AgeCursor{CreatedAt: createdAt, ID: uuid.UUID(id)}, true
}

// tenantKeyset pages ListTenants over svc.ListTenants, oldest first.
func tenantKeyset(svc *projects.Service) admin.Keyset[store.Tenant, store.TenantCursor] {
	return admin.Keyset[store.Tenant, store.TenantCursor]{
		Scope: []string{scopeListTenants},
		Fetch: func(ctx context.Context, after store.TenantCursor, limit int) ([]store.Tenant, error) {
			return svc.ListTenants(ctx, after, limit)
		},
		Cursor:   func(t store.Tenant) ([]byte, error) { return admin.EncodeAgeCursor(t.CreatedAt, t.ID[:]), nil },
		Position: ageCursor,
	}
}

// projectKeyset pages ListProjects of tenant over svc.ListProjects, oldest
// first.
func projectKeyset(svc *projects.Service, tenant uuid.UUID) admin.Keyset[store.Project, store.ProjectCursor] {
	return admin.Keyset[store.Project, store.ProjectCursor]{
		Scope: []string{scopeListProjects, admin.TenantName.Format(tenant.String())},
		Fetch: func(ctx context.Context, after store.ProjectCursor, limit int) ([]store.Project, error) {
			return svc.ListProjects(ctx, tenant, after, limit)
		},
		Cursor:   func(p store.Project) ([]byte, error) { return admin.EncodeAgeCursor(p.CreatedAt, p.ID[:]), nil },
		Position: ageCursor,
	}
}

// keyKeyset pages ListProjectKeys of a project over keys.List, oldest
// first.
func keyKeyset(keys *projects.Keys, tenant, project uuid.UUID) admin.Keyset[store.ProjectKey, store.AgeCursor] {
	return admin.Keyset[store.ProjectKey, store.AgeCursor]{
		Scope: []string{scopeListProjectKeys, admin.ProjectName.Format(tenant.String(), project.String())},
		Fetch: func(ctx context.Context, after store.AgeCursor, limit int) ([]store.ProjectKey, error) {
			return keys.List(ctx, tenant, project, after, limit)
		},
		Cursor: func(k store.ProjectKey) ([]byte, error) {
			c := projects.KeyCursor(k)
			return admin.EncodeAgeCursor(c.CreatedAt, c.ID[:]), nil
		},
		Position: ageCursor,
	}
}
