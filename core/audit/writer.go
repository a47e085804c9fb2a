package audit

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// QueueSize bounds the denied calls waiting for Run; a full queue drops
// (and counts) the newest.
const QueueSize = 1024

// scopeName is the instrumentation scope of the audit counters.
const scopeName = "berth.dev/core/audit"

// Store is what the Writer writes: the store's Admin.
type Store interface {
	RecordAuditEvent(ctx context.Context, p store.Provenance, e store.AuditEntry) error
}

// Writer records the admin server's calls (admin.Auditor): a mutating
// call's event when it ends, a project key's refused call through a
// bounded queue that Run drains.
type Writer struct {
	st       Store
	log      *slog.Logger
	queue    chan admin.Call
	failures atomic.Int64
	dropped  atomic.Int64
	counter  metric.Int64Counter
}

// NewWriter returns a Writer over st that logs failures to log.
func NewWriter(st Store, log *slog.Logger) *Writer {
	w := &Writer{st: st, log: log, queue: make(chan admin.Call, QueueSize)}
	// berth.audit.write.failures (Prometheus berth_audit_write_failures_total):
	// events that were not recorded, by cause (write, dropped).
	c, err := otel.Meter(scopeName).Int64Counter("berth.audit.write.failures",
		metric.WithDescription("Audit events not recorded: a failed write, or a denied call dropped from a full queue"))
	if err == nil {
		w.counter = c
	}
	return w
}

// Call records c (admin.Auditor). A failure is logged (the method,
// request id and error class; never the request) and counted.
func (w *Writer) Call(ctx context.Context, c admin.Call) {
	if err := w.st.RecordAuditEvent(ctx, callProvenance(c), callEntry(c)); err != nil {
		w.failures.Add(1)
		w.count(ctx, "write")
		w.log.WarnContext(ctx, "audit event not recorded", "method", c.Method, "request_id", c.RequestID.String(), "err", err)
	}
}

// Denied queues c for Run without blocking (admin.Auditor): the tap calls
// it on the connection's goroutine.
func (w *Writer) Denied(c admin.Call) {
	select {
	case w.queue <- c:
	default:
		w.dropped.Add(1)
		w.count(context.Background(), "dropped")
	}
}

// Run writes queued denied calls, each bounded by admin.AuditTimeout,
// until ctx ends.
func (w *Writer) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-w.queue:
			wctx, cancel := context.WithTimeout(ctx, admin.AuditTimeout)
			w.Call(wctx, c)
			cancel()
		}
	}
}

// Failures is how many events failed to write; Dropped how many denied
// calls a full queue dropped.
func (w *Writer) Failures() int64 { return w.failures.Load() }

// Dropped is how many denied calls a full queue dropped.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

func (w *Writer) count(ctx context.Context, cause string) {
	if w.counter != nil {
		w.counter.Add(ctx, 1, metric.WithAttributes(causeAttr(cause)))
	}
}

// callEntry is the event of a finished call.
func callEntry(c admin.Call) store.AuditEntry {
	id, err := uuid.NewRandom()
	if err != nil {
		id = uuid.Nil // refused by the store: counted as a failure
	}
	return store.AuditEntry{ID: id, Kind: store.AuditCall, Action: c.Action, Resource: c.Resource, Outcome: c.Outcome}
}

// MaxOwnerFailureNodes bounds the nodes an owner.failure event names (the
// count is always whole).
const MaxOwnerFailureNodes = 100

// OwnerFailure records Core's owner failure (a lifecycle drain past its
// bound, which closed admission) as a decision of Core itself
// (owner.failure, Core("owner_failure")): cause says which drain, nodes
// are the late workers' nodes. It never blocks (lifecycle.Config's
// OwnerFailures must not): the event is written on its own goroutine,
// bounded by admin.AuditTimeout. There is no transaction to share: closing
// admission is Core's memory, not a row. A failure is logged and counted.
func (w *Writer) OwnerFailure(cause string, nodes []uuid.UUID) {
	e := ownerFailureEntry(cause, nodes)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), admin.AuditTimeout)
		defer cancel()
		if err := w.st.RecordAuditEvent(ctx, Core("owner_failure"), e); err != nil {
			w.failures.Add(1)
			w.count(ctx, "write")
			w.log.WarnContext(ctx, "audit event not recorded", "action", e.Action, "err", err)
		}
	}()
}

// ownerFailureEntry is the owner.failure event of a drain of nodes that
// passed its bound for cause.
func ownerFailureEntry(cause string, nodes []uuid.UUID) store.AuditEntry {
	id, err := uuid.NewRandom()
	if err != nil {
		id = uuid.Nil // refused by the store: counted as a failure
	}
	names := make([]string, 0, min(len(nodes), MaxOwnerFailureNodes))
	for _, n := range nodes[:min(len(nodes), MaxOwnerFailureNodes)] {
		names = append(names, "nodes/"+n.String())
	}
	return store.AuditEntry{ID: id, Kind: store.AuditDecision, Action: "owner.failure", Outcome: "ok",
		Detail: map[string]any{"cause": cause, "late_workers": len(nodes), "nodes": names, "admission_closed": true}}
}
