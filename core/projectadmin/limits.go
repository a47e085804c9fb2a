package projectadmin

import (
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

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
