package projectadmin

import (
	"context"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/projects"
	"berth.dev/core/store"
)

// keyPaths maps the logic's field names to CreateProjectKey's paths.
var keyPaths = admin.FieldPaths{Renames: []admin.Rename{
	{From: "display_name", To: "key.display_name"},
	{From: "expire_time", To: "key.expire_time"},
}}

// scopeListProjectKeys is ListProjectKeys' page token scope; with the
// parent in it a token is refused for another project.
const scopeListProjectKeys = "berth.admin.v1.ProjectService/ListProjectKeys"

// keyOutputOnlyEmpty refuses a created key that sets an output-only field.
func keyOutputOnlyEmpty(k *adminv1.ProjectKey) error {
	switch {
	case k.GetName() != "":
		return errdefs.Invalid("key.name", reasonOutputOnly)
	case k.GetCreateTime() != nil:
		return errdefs.Invalid("key.create_time", reasonOutputOnly)
	case k.GetRevokeTime() != nil:
		return errdefs.Invalid("key.revoke_time", reasonOutputOnly)
	case k.GetState() != adminv1.ProjectKey_STATE_UNSPECIFIED:
		return errdefs.Invalid("key.state", reasonOutputOnly)
	}
	return nil
}

// keyProto is the API form of a key: never its token or digest.
func keyProto(k store.ProjectKey) *adminv1.ProjectKey {
	state := adminv1.ProjectKey_STATE_ACTIVE
	switch {
	case k.RevokedAt != nil:
		state = adminv1.ProjectKey_STATE_REVOKED
	case k.Expired:
		state = adminv1.ProjectKey_STATE_EXPIRED
	}
	return &adminv1.ProjectKey{
		Name:        admin.ProjectKeyName.Format(k.TenantID.String(), k.ProjectID.String(), k.ID.String()),
		DisplayName: k.DisplayName,
		CreateTime:  admin.Timestamp(&k.CreatedAt),
		ExpireTime:  admin.Timestamp(k.ExpireAt),
		RevokeTime:  admin.Timestamp(k.RevokedAt),
		State:       state,
	}
}

// CreateProjectKey creates a key of a live project; its token is in the
// first response only.
func (g *Server) CreateProjectKey(ctx context.Context, req *adminv1.CreateProjectKeyRequest) (*adminv1.CreateProjectKeyResponse, error) {
	tenant, project, err := projectID("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	id, err := requestID(req.GetRequestId())
	if err != nil {
		return nil, err
	}
	if err := keyOutputOnlyEmpty(req.GetKey()); err != nil {
		return nil, err
	}
	nk := projects.NewKey{RequestID: id, TenantID: tenant, ProjectID: project, DisplayName: req.GetKey().GetDisplayName()}
	if e := req.GetKey().GetExpireTime(); e != nil {
		if err := e.CheckValid(); err != nil {
			return nil, errdefs.Invalid("key.expire_time", "must be a valid timestamp")
		}
		t := e.AsTime()
		nk.ExpireAt = &t
	}
	k, token, err := g.keys.Create(ctx, nk)
	if err != nil {
		return nil, keyPaths.Map(err)
	}
	return &adminv1.CreateProjectKeyResponse{Key: keyProto(k), Token: token.Reveal()}, nil
}

// ListProjectKeys lists a project's keys in creation order.
func (g *Server) ListProjectKeys(ctx context.Context, req *adminv1.ListProjectKeysRequest) (*adminv1.ListProjectKeysResponse, error) {
	tenant, project, err := projectID("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), keyKeyset(g.keys, tenant, project))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListProjectKeysResponse{Keys: admin.Protos(page, keyProto), NextPageToken: next}, nil
}

// RevokeProjectKey revokes a key for good.
func (g *Server) RevokeProjectKey(ctx context.Context, req *adminv1.RevokeProjectKeyRequest) (*adminv1.RevokeProjectKeyResponse, error) {
	ids, err := admin.ValidateName("name", req.GetName(), admin.ProjectKeyName)
	if err != nil {
		return nil, err
	}
	k, err := g.keys.Revoke(ctx, uuid.MustParse(ids[0]), uuid.MustParse(ids[1]), uuid.MustParse(ids[2]))
	if err != nil {
		return nil, err
	}
	return &adminv1.RevokeProjectKeyResponse{Key: keyProto(k)}, nil
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
