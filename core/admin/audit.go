package admin

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

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

// auditing is the request-id and audit interceptor, last in the chain: it
// gives every authenticated call its request id (in its context and the
// berth-request-id response header) and, after the handler of a mutating
// method, hands the call to the Auditor.
type auditing struct{ rec Auditor }

func (a auditing) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	id := requestIDOf(req)
	ctx = withRequestID(ctx, id)
	_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, id.String()))
	resp, err := handler(ctx, req)
	a.record(ctx, info.FullMethod, id, resourceOf(req), err)
	return resp, err
}

func (a auditing) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	// A stream's request arrives inside the handler: its request id is
	// minted here, and its header sent at once (a stream may run for as
	// long as its Turn; its handlers set no header of their own).
	id := uuid.New()
	res := new(streamResource)
	ctx := context.WithValue(withRequestID(ss.Context(), id), streamResourceKey{}, res)
	_ = ss.SendHeader(metadata.Pairs(RequestIDHeader, id.String()))
	err := handler(srv, &verifiedStream{ServerStream: ss, ctx: ctx})
	name, _ := res.name.Load().(string)
	a.record(ctx, info.FullMethod, id, name, err)
	return err
}

// streamResource is the resource a streaming call names, which its
// handler learns only from a message (NoteResource).
type streamResource struct{ name atomic.Value }

type streamResourceKey struct{}

// NoteResource records, for the audit of the streaming call of ctx, the
// resource name its first message carries (an upload's header names its
// Session). A name of no known resource pattern is ignored, as resourceOf
// ignores one of a unary request.
func NoteResource(ctx context.Context, name string) {
	if res, ok := ctx.Value(streamResourceKey{}).(*streamResource); ok && knownName(name) {
		res.name.Store(name)
	}
}

// record hands a finished call of a mutating admin method to the Auditor.
func (a auditing) record(ctx context.Context, method string, id uuid.UUID, resource string, err error) {
	if a.rec == nil || !isAdminMethod(method) || !Mutating(method) {
		return
	}
	p := PrincipalFrom(ctx)
	if !p.admin && p.key.ID == uuid.Nil {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AuditTimeout)
	defer cancel()
	a.rec.Call(actx, Call{Method: method, Action: CallAction(method), Admin: p.admin, Key: p.key,
		RequestID: id, Resource: resource, Outcome: outcomeOf(err)})
}

// denied queues the tap's refusal of an authenticated key's call.
func (a auditing) denied(method string, p Principal) {
	if a.rec == nil || p.key.ID == uuid.Nil {
		return
	}
	a.rec.Denied(Call{Method: method, Action: CallAction(method), Key: p.key, RequestID: uuid.New(),
		Outcome: string(ReasonKeyMethodDenied)})
}

// outcomeOf is OutcomeOK for nil, else the ErrorInfo reason of err's
// status as the admin API answers it.
func outcomeOf(err error) string {
	if err == nil {
		return OutcomeOK
	}
	var s *status.Status
	if st, ok := status.FromError(ToStatus(err)); ok {
		s = st
	}
	if s != nil {
		for _, d := range s.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
				return info.GetReason()
			}
		}
	}
	if errors.Is(err, context.Canceled) {
		return string(ReasonCancelled)
	}
	return string(ReasonInternal)
}

// requestIDOf is the request's request_id when it has one that is a
// canonical UUID, else a fresh one.
func requestIDOf(req any) uuid.UUID {
	if m, ok := req.(proto.Message); ok {
		r := m.ProtoReflect()
		if fd := r.Descriptor().Fields().ByName("request_id"); fd != nil && fd.Kind() == protoreflect.StringKind && fd.Cardinality() != protoreflect.Repeated {
			s := r.Get(fd).String()
			if id, err := uuid.Parse(s); err == nil && id != uuid.Nil && id.String() == s {
				return id
			}
		}
	}
	return uuid.New()
}

// resourceOf is the resource a request names: its name, else its parent,
// else the name of a resource message it carries (UpdateTenant's
// tenant.name), when that is a name of the admin API's patterns.
func resourceOf(req any) string {
	m, ok := req.(proto.Message)
	if !ok {
		return ""
	}
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	for _, n := range []protoreflect.Name{"name", "parent"} {
		if s := stringField(r, fields.ByName(n)); knownName(s) {
			return s
		}
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Kind() != protoreflect.MessageKind || fd.Cardinality() == protoreflect.Repeated || !r.Has(fd) {
			continue
		}
		sub := r.Get(fd).Message()
		if s := stringField(sub, sub.Descriptor().Fields().ByName("name")); knownName(s) {
			return s
		}
	}
	return ""
}

// stringField reads a singular string field; "" for anything else.
func stringField(r protoreflect.Message, fd protoreflect.FieldDescriptor) string {
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.Cardinality() == protoreflect.Repeated {
		return ""
	}
	return r.Get(fd).String()
}
