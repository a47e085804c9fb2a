package projectadmin

import (
	"strconv"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/projects"
	"berth.dev/core/store"
)

// The logic's field names as paths of the tenant and project requests.
var (
	tenantPaths = admin.FieldPaths{Renames: []admin.Rename{
		{From: "display_name", To: "tenant.display_name"},
		{From: "revision", To: "etag"},
	}}
	projectPaths = admin.FieldPaths{Renames: []admin.Rename{
		{From: "display_name", To: "project.display_name"},
		{From: "max_active_sessions", To: "project.limits.max_active_sessions"},
		{From: "max_retained_sessions", To: "project.limits.max_retained_sessions"},
		{From: "revision", To: "etag"},
	}}
)

// The fixed reasons of this adapter's field errors.
const (
	reasonOutputOnly = "is output only"
	reasonEtag       = "must be an etag this service returned"
	reasonMask       = "may name only display_name"
)

// tenantOutputOnlyEmpty refuses a created tenant that sets an output-only
// field, naming it.
func tenantOutputOnlyEmpty(t *adminv1.Tenant) error {
	switch {
	case t.GetName() != "":
		return errdefs.Invalid("tenant.name", reasonOutputOnly)
	case t.GetCreateTime() != nil:
		return errdefs.Invalid("tenant.create_time", reasonOutputOnly)
	case t.GetUpdateTime() != nil:
		return errdefs.Invalid("tenant.update_time", reasonOutputOnly)
	case t.GetEtag() != "":
		return errdefs.Invalid("tenant.etag", reasonOutputOnly)
	}
	return nil
}

// projectOutputOnlyEmpty is tenantOutputOnlyEmpty for a created project.
func projectOutputOnlyEmpty(p *adminv1.Project) error {
	switch {
	case p.GetName() != "":
		return errdefs.Invalid("project.name", reasonOutputOnly)
	case p.GetCreateTime() != nil:
		return errdefs.Invalid("project.create_time", reasonOutputOnly)
	case p.GetUpdateTime() != nil:
		return errdefs.Invalid("project.update_time", reasonOutputOnly)
	case p.GetEtag() != "":
		return errdefs.Invalid("project.etag", reasonOutputOnly)
	case p.GetUsage() != nil:
		return errdefs.Invalid("project.usage", reasonOutputOnly)
	}
	return nil
}

// parseEtag reads an etag into the stored revision it carries: empty is
// projects.AnyRevision; anything but a positive decimal is invalid.
func parseEtag(field, value string) (int64, error) {
	if value == "" {
		return projects.AnyRevision, nil
	}
	r, err := strconv.ParseInt(value, 10, 64)
	if err != nil || r < 1 || strconv.FormatInt(r, 10) != value {
		return 0, errdefs.Invalid(field, reasonEtag)
	}
	return r, nil
}

// etag is the etag of a stored revision.
func etag(revision int64) string { return strconv.FormatInt(revision, 10) }

// displayNameMask checks an update_mask: unset or empty, or naming only
// display_name.
func displayNameMask(m *fieldmaskpb.FieldMask) error {
	for _, p := range m.GetPaths() {
		if p != "display_name" {
			return errdefs.Invalid("update_mask", reasonMask)
		}
	}
	return nil
}

// requestID checks a create's request_id and returns it.
func requestID(value string) (uuid.UUID, error) {
	if err := admin.ValidateRequestID("request_id", value); err != nil {
		return uuid.Nil, err
	}
	return uuid.MustParse(value), nil
}

// tenantID parses "tenants/{tenant}" in field.
func tenantID(field, name string) (uuid.UUID, error) {
	ids, err := admin.ValidateName(field, name, admin.TenantName)
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.MustParse(ids[0]), nil
}

// projectID parses "tenants/{tenant}/projects/{project}" in field.
func projectID(field, name string) (tenant, project uuid.UUID, err error) {
	ids, err := admin.ValidateName(field, name, admin.ProjectName)
	if err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	return uuid.MustParse(ids[0]), uuid.MustParse(ids[1]), nil
}

// tenantProto is the API form of a tenant.
func tenantProto(t store.Tenant) *adminv1.Tenant {
	return &adminv1.Tenant{
		Name:        admin.TenantName.Format(t.ID.String()),
		DisplayName: t.DisplayName,
		CreateTime:  admin.Timestamp(&t.CreatedAt),
		UpdateTime:  admin.Timestamp(&t.UpdatedAt),
		Etag:        etag(t.Revision),
	}
}

// projectProto is the API form of a project.
func projectProto(p store.Project) *adminv1.Project {
	return &adminv1.Project{
		Name:        admin.ProjectName.Format(p.TenantID.String(), p.ID.String()),
		DisplayName: p.DisplayName,
		CreateTime:  admin.Timestamp(&p.CreatedAt),
		UpdateTime:  admin.Timestamp(&p.UpdatedAt),
		Etag:        etag(p.Revision),
		Limits:      limitsProto(p),
		Usage:       usageProto(p.Usage),
	}
}

// keyPaths maps the logic's field names to CreateProjectKey's paths.
var keyPaths = admin.FieldPaths{Renames: []admin.Rename{
	{From: "display_name", To: "key.display_name"},
	{From: "expire_time", To: "key.expire_time"},
}}

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

// The update_mask paths of a project's fields.
const (
	pathDisplayName         = "display_name"
	pathMaxActiveSessions   = "limits.max_active_sessions"
	pathMaxRetainedSessions = "limits.max_retained_sessions"
)

// reasonProjectMask is the fixed reason of a project update_mask naming
// another field.
const reasonProjectMask = "may name only display_name, limits.max_active_sessions and limits.max_retained_sessions"

// projectLimits is the store form of a project's limits (nil: none).
func projectLimits(l *adminv1.ProjectLimits) store.ProjectLimits {
	if l == nil {
		return store.ProjectLimits{}
	}
	return store.ProjectLimits{MaxActiveSessions: l.MaxActiveSessions, MaxRetainedSessions: l.MaxRetainedSessions}
}

// projectChanges reads an UpdateProject's mask (unset or empty:
// display_name) and the named fields of p into the store's changes.
func projectChanges(m *fieldmaskpb.FieldMask, p *adminv1.Project) (store.ProjectChanges, error) {
	paths := m.GetPaths()
	if len(paths) == 0 {
		paths = []string{pathDisplayName}
	}
	var c store.ProjectChanges
	limits := projectLimits(p.GetLimits())
	for _, path := range paths {
		switch path {
		case pathDisplayName:
			name := p.GetDisplayName()
			c.DisplayName = &name
		case pathMaxActiveSessions:
			c.SetMaxActiveSessions, c.MaxActiveSessions = true, limits.MaxActiveSessions
		case pathMaxRetainedSessions:
			c.SetMaxRetainedSessions, c.MaxRetainedSessions = true, limits.MaxRetainedSessions
		default:
			return store.ProjectChanges{}, errdefs.Invalid("update_mask", reasonProjectMask)
		}
	}
	return c, nil
}

// limitsProto is the API form of a project's limits; nil when it has none.
func limitsProto(p store.Project) *adminv1.ProjectLimits {
	if p.MaxActiveSessions == nil && p.MaxRetainedSessions == nil {
		return nil
	}
	return &adminv1.ProjectLimits{MaxActiveSessions: p.MaxActiveSessions, MaxRetainedSessions: p.MaxRetainedSessions}
}

// usageProto is the API form of what a project holds.
func usageProto(u store.ProjectUsage) *adminv1.ProjectUsage {
	return &adminv1.ProjectUsage{Held: u.Held, Retained: u.Retained}
}
