package auditadmin

import (
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// The fixed reasons of this adapter's field errors.
const (
	reasonActor = `must be "admin", "core" or "key:<key id>"`
	reasonText  = "must be at most 256 characters without control characters"
	reasonTime  = "must be a valid timestamp"
	reasonRange = "must be after start_time"
)

// keyActorPrefix starts a project key's actor.
const keyActorPrefix = "key:"

// Filter converts a request's filters into the store's, and returns the
// page token scope entries that pin them.
func Filter(req *adminv1.ListAuditEventsRequest) (store.AuditFilter, []string, error) {
	var f store.AuditFilter
	var scope []string
	if ts := req.GetStartTime(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return f, nil, errdefs.Invalid("start_time", reasonTime)
		}
		t := ts.AsTime()
		f.Start = &t
		scope = append(scope, "start_time="+t.Format(time.RFC3339Nano))
	}
	if ts := req.GetEndTime(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return f, nil, errdefs.Invalid("end_time", reasonTime)
		}
		t := ts.AsTime()
		if f.Start != nil && !t.After(*f.Start) {
			return f, nil, errdefs.Invalid("end_time", reasonRange)
		}
		f.End = &t
		scope = append(scope, "end_time="+t.Format(time.RFC3339Nano))
	}
	switch a := req.GetActor(); {
	case a == "":
	case a == store.ActorAdmin, a == store.ActorCore:
		f.ActorKind = a
	case strings.HasPrefix(a, keyActorPrefix):
		id, err := uuid.Parse(strings.TrimPrefix(a, keyActorPrefix))
		if err != nil || id == uuid.Nil || keyActorPrefix+id.String() != a {
			return f, nil, errdefs.Invalid("actor", reasonActor)
		}
		f.ActorKind, f.ActorKeyID = store.ActorProjectKey, &id
	default:
		return f, nil, errdefs.Invalid("actor", reasonActor)
	}
	if a := req.GetActor(); a != "" {
		scope = append(scope, "actor="+a)
	}
	if p := req.GetProject(); p != "" {
		ids, err := admin.ValidateName("project", p, admin.ProjectName)
		if err != nil {
			return f, nil, err
		}
		id := uuid.MustParse(ids[1])
		f.ProjectID = &id
		scope = append(scope, "project="+p)
	}
	for _, t := range []struct {
		field string
		value string
		into  *string
	}{
		{"action_prefix", req.GetActionPrefix(), &f.ActionPrefix},
		{"resource", req.GetResource(), &f.Resource},
		{"outcome", req.GetOutcome(), &f.Outcome},
	} {
		if t.value == "" {
			continue
		}
		if len(t.value) > store.MaxAuditResource || strings.IndexFunc(t.value, unicode.IsControl) >= 0 {
			return f, nil, errdefs.Invalid(t.field, reasonText)
		}
		*t.into = t.value
		scope = append(scope, t.field+"="+t.value)
	}
	return f, scope, nil
}

// EventProto converts a recorded event.
func EventProto(e store.AuditEvent) *adminv1.AuditEvent {
	out := &adminv1.AuditEvent{
		Id:        e.ID.String(),
		OccurTime: timestamppb.New(e.OccurredAt),
		Kind:      kindProto(e.Kind),
		Actor:     e.Actor(),
		Action:    e.Action,
		Resource:  e.Resource,
		RequestId: e.RequestID.String(),
		Outcome:   e.Outcome,
	}
	if e.ProjectID != nil && e.TenantID != nil {
		out.Project = admin.ProjectName.Format(e.TenantID.String(), e.ProjectID.String())
	}
	if e.ParentID != nil {
		out.ParentId = e.ParentID.String()
	}
	if len(e.Detail) > 0 {
		if s, err := structpb.NewStruct(e.Detail); err == nil {
			out.Detail = s
		}
	}
	return out
}

// kindProto is the API's kind of a recorded event's kind.
func kindProto(kind string) adminv1.AuditEvent_Kind {
	switch kind {
	case store.AuditCall:
		return adminv1.AuditEvent_KIND_CALL
	case store.AuditDecision:
		return adminv1.AuditEvent_KIND_DECISION
	}
	return adminv1.AuditEvent_KIND_UNSPECIFIED
}
