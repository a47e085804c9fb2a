package store

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// The kinds of audit events: a mutating admin call, recorded after its
// handler (best effort), and a lifecycle decision, recorded in the
// deciding transaction.
const (
	AuditCall     = "call"
	AuditDecision = "decision"
)

// The actor kinds of an audit event.
const (
	ActorAdmin      = "admin"
	ActorProjectKey = "project_key"
	ActorCore       = "core"
)

// AuditSweepBatch is the most events one ExpireAuditEvents deletes.
const AuditSweepBatch = 1000

// MaxAuditResource is the longest resource an event names.
const MaxAuditResource = 256

var (
	auditAction  = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,63}$`)
	auditOutcome = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// ValidAuditAction reports whether action may name an audit event
// ("session.archive", "call.session_service.create_session").
func ValidAuditAction(action string) bool { return auditAction.MatchString(action) }

// ValidAuditOutcome reports whether outcome may be an event's outcome:
// "ok" or a status reason.
func ValidAuditOutcome(outcome string) bool { return auditOutcome.MatchString(outcome) }

// Provenance is who and which request an audit event records: the
// administrator, a project key (its id and project, never its secret) or
// Core itself, and the request id. It is a token: only core/audit makes
// one (audit.From from a call's principal and request id, audit.Core for
// Core's own decisions), through NewAdminProvenance, NewKeyProvenance and
// NewCoreProvenance; the zero Provenance is refused (errdefs.ErrInvalid),
// so a write that must record who decided cannot forget to.
type Provenance struct {
	actor     string
	keyID     uuid.UUID
	tenantID  uuid.UUID
	projectID uuid.UUID
	requestID uuid.UUID
	parentID  uuid.UUID
	reason    string
}

// NewAdminProvenance is the administrator's request requestID.
func NewAdminProvenance(requestID uuid.UUID) Provenance {
	return Provenance{actor: ActorAdmin, requestID: requestID}
}

// NewKeyProvenance is project key keyID's request requestID, in its
// project.
func NewKeyProvenance(keyID, tenantID, projectID, requestID uuid.UUID) Provenance {
	return Provenance{actor: ActorProjectKey, keyID: keyID, tenantID: tenantID, projectID: projectID, requestID: requestID}
}

// NewCoreProvenance is Core's own decision for reason (a snake_case word,
// recorded in the event's detail as "core_reason"), under requestID.
func NewCoreProvenance(reason string, requestID uuid.UUID) Provenance {
	return Provenance{actor: ActorCore, reason: reason, requestID: requestID}
}

// WithParent returns p for work done on behalf of another recorded act
// (a reset's archives carry the reset's id).
func (p Provenance) WithParent(id uuid.UUID) Provenance { p.parentID = id; return p }

// Actor names p's actor as events report it: "admin", "key:<id>", "core"
// ("" for the zero Provenance).
func (p Provenance) Actor() string {
	if p.actor == ActorProjectKey {
		return "key:" + p.keyID.String()
	}
	return p.actor
}

// RequestID is the request p records.
func (p Provenance) RequestID() uuid.UUID { return p.requestID }

// valid refuses the zero Provenance and one its constructors could not
// make whole.
func (p Provenance) valid() error {
	switch {
	case p.requestID == uuid.Nil:
		return errdefs.Invalid("provenance", "must name a request: make it with core/audit")
	case p.actor == ActorAdmin:
		return nil
	case p.actor == ActorProjectKey && p.keyID != uuid.Nil && p.projectID != uuid.Nil:
		return nil
	case p.actor == ActorCore && ValidAuditOutcome(p.reason):
		return nil
	}
	return errdefs.Invalid("provenance", "must name its actor: make it with core/audit")
}

// AuditEntry is one event to record: what happened to which resource and
// how it ended. Detail holds authored keys only (counts, generations,
// node names, reasons): never a request body, a configuration or a
// credential.
type AuditEntry struct {
	ID   uuid.UUID
	Kind string
	// Action is "session.archive" or "call.<service>.<method>" in
	// snake_case (ValidAuditAction).
	Action string
	// Resource is the resource name the event is about ("" for none); at
	// most MaxAuditResource bytes, no control characters.
	Resource string
	// Outcome is "ok" or the refusal's reason (ValidAuditOutcome).
	Outcome string
	// TenantID and ProjectID scope the event; nil takes the provenance's
	// (a project key's project).
	TenantID, ProjectID *uuid.UUID
	Detail              map[string]any
}

// AuditEvent is a recorded event.
type AuditEvent struct {
	ID         uuid.UUID
	OccurredAt time.Time
	Kind       string
	ActorKind  string
	ActorKeyID *uuid.UUID
	TenantID   *uuid.UUID
	ProjectID  *uuid.UUID
	Action     string
	Resource   string
	RequestID  uuid.UUID
	ParentID   *uuid.UUID
	Outcome    string
	Detail     map[string]any
}

// Actor names the event's actor: "admin", "key:<id>" or "core".
func (e AuditEvent) Actor() string {
	if e.ActorKind == ActorProjectKey && e.ActorKeyID != nil {
		return "key:" + e.ActorKeyID.String()
	}
	return e.ActorKind
}

// RecordAuditEvent records one event for p on its own (a call's event,
// after its handler). Events of a decision are recorded in the deciding
// write's transaction instead (recordAudit).
func (s *Admin) RecordAuditEvent(ctx context.Context, p Provenance, e AuditEntry) error {
	if err := recordAudit(ctx, s.q, p, e); err != nil {
		return fmt.Errorf("record audit event: %w", err)
	}
	return nil
}

// recordAudit inserts e for p on q: the helper every deciding store write
// calls inside its own transaction, so the event commits or rolls back
// with its decision. Errors are classified (the caller wraps them).
func recordAudit(ctx context.Context, q *db.Queries, p Provenance, e AuditEntry) error {
	if err := p.valid(); err != nil {
		return err
	}
	arg, err := auditParams(p, e)
	if err != nil {
		return err
	}
	if err := q.InsertAuditEvent(ctx, arg); err != nil {
		return wrap("insert audit event", err)
	}
	return nil
}

// auditParams checks e and makes its row.
func auditParams(p Provenance, e AuditEntry) (db.InsertAuditEventParams, error) {
	switch {
	case e.ID == uuid.Nil:
		return db.InsertAuditEventParams{}, errdefs.Invalid("id", "must not be the nil UUID")
	case e.Kind != AuditCall && e.Kind != AuditDecision:
		return db.InsertAuditEventParams{}, errdefs.Invalid("kind", "must be call or decision")
	case !ValidAuditAction(e.Action):
		return db.InsertAuditEventParams{}, errdefs.Invalid("action", "must be lower-case words joined by . or _")
	case !ValidAuditOutcome(e.Outcome):
		return db.InsertAuditEventParams{}, errdefs.Invalid("outcome", "must be ok or a reason")
	case len(e.Resource) > MaxAuditResource || strings.IndexFunc(e.Resource, unicode.IsControl) >= 0:
		return db.InsertAuditEventParams{}, errdefs.Invalid("resource", "must be a resource name")
	}
	detail := e.Detail
	if p.reason != "" {
		detail = make(map[string]any, len(e.Detail)+1)
		for k, v := range e.Detail {
			detail[k] = v
		}
		detail["core_reason"] = p.reason
	}
	var raw []byte
	if len(detail) > 0 {
		b, err := json.Marshal(detail)
		if err != nil {
			return db.InsertAuditEventParams{}, errdefs.Invalid("detail", "must be a JSON object")
		}
		raw = b
	}
	arg := db.InsertAuditEventParams{ID: e.ID, Kind: e.Kind, ActorKind: p.actor, Action: e.Action,
		Resource: e.Resource, RequestID: p.requestID, Outcome: e.Outcome, Detail: raw,
		TenantID: e.TenantID, ProjectID: e.ProjectID}
	if p.actor == ActorProjectKey {
		key, tenant, project := p.keyID, p.tenantID, p.projectID
		arg.ActorKeyID = &key
		if arg.ProjectID == nil {
			arg.TenantID, arg.ProjectID = &tenant, &project
		}
	}
	if p.parentID != uuid.Nil {
		parent := p.parentID
		arg.ParentID = &parent
	}
	return arg, nil
}

// AuditFilter narrows ListAuditEvents; every zero field is no filter.
type AuditFilter struct {
	// Start and End bound occurred_at: from Start (inclusive) to End
	// (exclusive). A nil End is now() - 5 s on the database clock: an
	// event's occurred_at is its insert's clock, and a transaction that
	// commits late would otherwise appear behind a reader that already
	// listed past it.
	Start, End *time.Time
	// ActorKind is ActorAdmin, ActorProjectKey or ActorCore; ActorKeyID
	// one key's events.
	ActorKind  string
	ActorKeyID *uuid.UUID
	ProjectID  *uuid.UUID
	// ActionPrefix matches actions that start with it.
	ActionPrefix string
	Resource     string
	Outcome      string
}

// AuditCursor is a position in the trail's (occurred_at, id) order; the
// zero value is the start.
type AuditCursor struct {
	OccurredAt time.Time
	ID         uuid.UUID
}

// ListAuditEvents returns up to limit events of f after position after,
// in (occurred_at, id) order: new events append, so pages are stable.
func (s *Reader) ListAuditEvents(ctx context.Context, f AuditFilter, after AuditCursor, limit int) ([]AuditEvent, error) {
	return listPage("list audit events", limit, func(n int32) ([]db.AuditEvent, error) {
		return s.q.ListAuditEvents(ctx, db.ListAuditEventsParams{
			AfterOccurredAt: after.OccurredAt, AfterID: after.ID,
			StartTime: f.Start, EndTime: f.End,
			ActorKind: optText(f.ActorKind), ActorKeyID: f.ActorKeyID, ProjectID: f.ProjectID,
			ActionPrefix: optText(f.ActionPrefix), Resource: optText(f.Resource), Outcome: optText(f.Outcome),
			PageSize: n,
		})
	}, auditEvent)
}

// optText is an optional text filter: "" is none.
func optText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func auditEvent(r db.AuditEvent) AuditEvent {
	e := AuditEvent{ID: r.ID, OccurredAt: r.OccurredAt, Kind: r.Kind, ActorKind: r.ActorKind,
		ActorKeyID: r.ActorKeyID, TenantID: r.TenantID, ProjectID: r.ProjectID, Action: r.Action,
		Resource: r.Resource, RequestID: r.RequestID, ParentID: r.ParentID, Outcome: r.Outcome}
	if len(r.Detail) > 0 {
		// The column is a JSON object (its CHECK); a row that is not
		// reads as no detail.
		_ = json.Unmarshal(r.Detail, &e.Detail)
	}
	return e
}

// ExpireAuditEvents deletes up to AuditSweepBatch events that occurred
// more than retention ago on the database clock, oldest first, and
// returns how many it deleted; core/audit's sweeper calls it until a batch
// is short. Only the owner sweeps, so two Cores never race on the batch.
func (s *Owner) ExpireAuditEvents(ctx context.Context, retention time.Duration) (int64, error) {
	const op = "expire audit events"
	if retention < time.Second {
		return 0, fmt.Errorf("%s: %w", op, errdefs.Invalid("retention", "must be at least one second"))
	}
	var n int64
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		var err error
		n, err = q.DeleteExpiredAuditEvents(ctx, db.DeleteExpiredAuditEventsParams{
			RetentionMicros: retention.Microseconds(), Batch: AuditSweepBatch})
		return err
	})
	if err != nil {
		return 0, wrap(op, err)
	}
	return n, nil
}
