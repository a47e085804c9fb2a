package admin

import (
	"context"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/projects"
)

// AuditTimeout bounds the write of one call's audit event, on a context
// detached from the call (the call's own may have ended).
const AuditTimeout = 2 * time.Second

// OutcomeOK is the outcome of a call that succeeded; any other outcome is
// the ErrorInfo reason of the status it answered.
const OutcomeOK = "ok"

// Call is a finished admin call as the audit trail records it. It never
// holds a request body or a credential.
type Call struct {
	// Method is the full method ("/berth.admin.v1.SessionService/
	// CreateSession"); Action its audit action (CallAction).
	Method, Action string
	// Admin is set for the administrator; otherwise Key is the project
	// key the call held (authenticated by its digest; for a call the tap
	// refused, not yet verified against the database).
	Admin bool
	Key   projects.Key
	// RequestID is the call's request id (RequestIDFrom).
	RequestID uuid.UUID
	// Resource is the request's name or parent when it is a name of the
	// admin API's patterns, else "".
	Resource string
	// Outcome is OutcomeOK or the answer's reason.
	Outcome string
}

// Auditor records admin calls: core/audit's Writer.
type Auditor interface {
	// Call records a finished call of a mutating method on ctx (detached
	// from the call, bounded by AuditTimeout). It reports nothing: a
	// failed write is the Auditor's to log and count, and never changes
	// the call's answer.
	Call(ctx context.Context, c Call)
	// Denied queues a project key's call the tap refused. It runs on the
	// connection's goroutine: it must not block or do I/O.
	Denied(c Call)
}
