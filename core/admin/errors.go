package admin

import (
	"context"
	"errors"
	"regexp"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every admin API error.
const ErrorDomain = "admin.berth.dev"

// Reason is the fixed google.rpc.ErrorInfo reason of an admin API error.
// The errdefs-derived reasons are the node protocol's wire codes, so one
// vocabulary describes outcomes across Berth.
type Reason string

// The reasons.
const (
	ReasonInvalid                Reason = "invalid"
	ReasonOwnership              Reason = "ownership"
	ReasonExists                 Reason = "exists"
	ReasonNotFound               Reason = "not_found"
	ReasonCommandUnconfirmed     Reason = "command_unconfirmed"
	ReasonComputeUnconfirmed     Reason = "compute_unconfirmed"
	ReasonUnsupported            Reason = "unsupported"
	ReasonObservationUnavailable Reason = "observation_unavailable"
	ReasonRuntimeNotRunning      Reason = "runtime_not_running"
	ReasonProtocolMismatch       Reason = "protocol_mismatch"
	ReasonFenced                 Reason = "fenced"
	// ReasonFailedPrecondition refuses an operation the resource's state
	// does not allow. It is the admin API's own: the node protocol has no
	// such code.
	ReasonFailedPrecondition Reason = "failed_precondition"
	// ReasonCancelled and ReasonDeadlineExceeded end a call whose context
	// ended; neither proves that a mutation did or did not happen.
	ReasonCancelled        Reason = "cancelled"
	ReasonDeadlineExceeded Reason = "deadline_exceeded"
	// ReasonUnauthenticated refuses a call without the admin token.
	ReasonUnauthenticated Reason = "unauthenticated"
	// ReasonUnimplemented answers a method this server does not serve.
	ReasonUnimplemented Reason = "unimplemented"
	// ReasonInternal is every error of no known class.
	ReasonInternal Reason = "internal"
)

// The ErrorInfo metadata keys. Their values are authored names only.
const (
	// MetadataField names the invalid field of an invalid request.
	MetadataField = "field"
	// MetadataOperation names the provider operation of an unsupported
	// error.
	MetadataOperation = "operation"
	// MetadataReason is the declaration's reason code of an unsupported
	// error.
	MetadataReason = "reason"
)

// class binds an errdefs class to its gRPC code, fixed message and reason.
type class struct {
	sentinel error
	code     codes.Code
	message  string
	reason   Reason
}

// classes is in precedence order: an error of several classes crosses as
// the first. Unknown outcomes come first because they never permit a retry;
// fencing and version rejection next because they are decided before
// anything else is touched.
var classes = []class{
	{errdefs.ErrCommandUnconfirmed, codes.Unknown, "command completion unconfirmed", ReasonCommandUnconfirmed},
	{errdefs.ErrComputeUnconfirmed, codes.Unknown, "compute outcome unconfirmed", ReasonComputeUnconfirmed},
	{errdefs.ErrFenced, codes.FailedPrecondition, "fenced", ReasonFenced},
	{errdefs.ErrProtocolMismatch, codes.FailedPrecondition, "protocol mismatch", ReasonProtocolMismatch},
	{errdefs.ErrUnsupported, codes.Unimplemented, "unsupported operation", ReasonUnsupported},
	{errdefs.ErrInvalid, codes.InvalidArgument, "invalid argument", ReasonInvalid},
	{errdefs.ErrOwnership, codes.FailedPrecondition, "ownership mismatch", ReasonOwnership},
	{errdefs.ErrExists, codes.AlreadyExists, "already exists", ReasonExists},
	{errdefs.ErrNotFound, codes.NotFound, "not found", ReasonNotFound},
	{errdefs.ErrRuntimeNotRunning, codes.FailedPrecondition, "runtime not running", ReasonRuntimeNotRunning},
	{errdefs.ErrFailedPrecondition, codes.FailedPrecondition, "failed precondition", ReasonFailedPrecondition},
	{errdefs.ErrObservationUnavailable, codes.Unavailable, "observation unavailable", ReasonObservationUnavailable},
}

// The fixed statuses that no errdefs class produces.
var (
	internalClass = class{nil, codes.Internal, "internal error", ReasonInternal}
	cancelled     = class{nil, codes.Canceled, "request cancelled", ReasonCancelled}
	deadline      = class{nil, codes.DeadlineExceeded, "deadline exceeded", ReasonDeadlineExceeded}
)

// statusError is an error already in the admin API's wire form. ToStatus
// passes it through unchanged, so converting twice is harmless.
type statusError struct{ st *status.Status }

func (e *statusError) Error() string              { return e.st.Message() }
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// ToStatus is the one mapping from errors to the admin API's gRPC status:
//
//   - errdefs.ErrInvalid: INVALID_ARGUMENT; a FieldError adds a
//     google.rpc.BadRequest field violation naming the field, and the field
//     and its reason appear in the message when they have the authored
//     form (dotted snake_case paths, fixed phrases).
//   - ErrNotFound: NOT_FOUND. ErrExists: ALREADY_EXISTS.
//   - ErrOwnership, ErrFenced, ErrProtocolMismatch, ErrRuntimeNotRunning,
//     ErrFailedPrecondition: FAILED_PRECONDITION.
//   - ErrObservationUnavailable: UNAVAILABLE.
//   - ErrUnsupported: UNIMPLEMENTED (with the operation and reason code of
//     a providercontract.UnsupportedError in the ErrorInfo).
//   - ErrComputeUnconfirmed, ErrCommandUnconfirmed: UNKNOWN, an unknown
//     outcome that must not be retried blindly.
//   - context.Canceled / context.DeadlineExceeded (or such a status from
//     the transport): CANCELLED / DEADLINE_EXCEEDED.
//   - an UNIMPLEMENTED status (the generated answer of a method a
//     registered service does not implement): UNIMPLEMENTED "unknown
//     method".
//   - anything else, errdefs.ErrContract and other gRPC statuses included:
//     INTERNAL "internal error".
//
// Every status carries a google.rpc.ErrorInfo (domain ErrorDomain) whose
// reason is a Reason. Messages are fixed: err.Error() never crosses. nil
// returns nil.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	var se *statusError
	if errors.As(err, &se) {
		return se
	}
	for _, c := range classes {
		if !errors.Is(err, c.sentinel) {
			continue
		}
		var me *messageError
		if errors.As(err, &me) && safeReason(me.message) {
			c.message = me.message
		}
		switch c.reason {
		case ReasonInvalid:
			return invalidStatus(err)
		case ReasonUnsupported:
			var ue *providercontract.UnsupportedError
			if errors.As(err, &ue) && safeName(string(ue.Operation)) && ue.Code.Valid() {
				return newStatus(c, map[string]string{
					MetadataOperation: string(ue.Operation), MetadataReason: string(ue.Code),
				})
			}
		}
		return newStatus(c, nil)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return newStatus(cancelled, nil)
	case errors.Is(err, context.DeadlineExceeded):
		return newStatus(deadline, nil)
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Canceled:
			return newStatus(cancelled, nil)
		case codes.DeadlineExceeded:
			return newStatus(deadline, nil)
		case codes.Unimplemented:
			// The generated Unimplemented*Server answer of a method a
			// registered service does not implement (yet).
			return unimplemented()
		}
	}
	return newStatus(internalClass, nil)
}

// messageError carries an authored status message for its error.
type messageError struct {
	err     error
	message string
}

func (e *messageError) Error() string { return e.err.Error() }
func (e *messageError) Unwrap() error { return e.err }

// WithMessage returns err carrying message, which ToStatus sends instead
// of the fixed message of err's class (code and reason stay the class's).
// message must be an authored constant phrase (a short phrase starting in
// lowercase); anything else is ignored and the class's message is kept.
// An invalid argument keeps its field message.
func WithMessage(err error, message string) error {
	if err == nil {
		return nil
	}
	return &messageError{err: err, message: message}
}

// unauthenticated is the status of a call without a valid admin token.
// message is one of the authored messages in auth.go.
func unauthenticated(message string) error {
	return newStatus(class{nil, codes.Unauthenticated, message, ReasonUnauthenticated}, nil)
}

// unimplemented answers a method this server does not serve.
func unimplemented() error {
	return newStatus(class{nil, codes.Unimplemented, "unknown method", ReasonUnimplemented}, nil)
}

func invalidStatus(err error) error {
	c := classes[indexOf(ReasonInvalid)]
	var fe *errdefs.FieldError
	if !errors.As(err, &fe) || !safeField(fe.Field) {
		return newStatus(c, nil)
	}
	reason := fe.Reason
	if !safeReason(reason) {
		reason = "invalid"
	}
	c.message = "invalid " + fe.Field + ": " + reason
	return newStatus(c, map[string]string{MetadataField: fe.Field},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: fe.Field, Description: reason},
		}})
}

func indexOf(r Reason) int {
	for i, c := range classes {
		if c.reason == r {
			return i
		}
	}
	panic("admin: no class for reason " + string(r))
}

// newStatus builds the one status form of c: its code and fixed message,
// an ErrorInfo and any further details, marshalled deterministically so one
// error always crosses as the same bytes. These messages always marshal;
// a detail that could not would be left off.
func newStatus(c class, md map[string]string, more ...proto.Message) error {
	details := append([]proto.Message{&errdetails.ErrorInfo{Reason: string(c.reason), Domain: ErrorDomain, Metadata: md}}, more...)
	p := &spb.Status{Code: int32(c.code), Message: c.message}
	for _, d := range details {
		a := new(anypb.Any)
		if err := anypb.MarshalFrom(a, d, proto.MarshalOptions{Deterministic: true}); err != nil {
			continue
		}
		p.Details = append(p.Details, a)
	}
	return &statusError{st: status.FromProto(p)}
}

// fieldPattern is the authored form of a field path: dotted lowercase
// snake_case names with optional list indexes ("turn.command.argv.args[0]").
var fieldPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\[[0-9]{1,6}\])?(\.[a-z][a-z0-9_]*(\[[0-9]{1,6}\])?)*$`)

// reasonPattern is the authored form of a field error's reason: a short
// phrase starting in lowercase. Anything else (which would be a bug) is replaced, so a
// submitted value can never cross in a reason.
var reasonPattern = regexp.MustCompile(`^[a-z0-9][A-Za-z0-9 _.,;:()'{}/-]{0,119}$`)

// namePattern is the form of a provider operation name ("RunCommand").
var namePattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,63}$`)

func safeField(f string) bool  { return len(f) <= 128 && fieldPattern.MatchString(f) }
func safeReason(r string) bool { return reasonPattern.MatchString(r) }
func safeName(n string) bool   { return namePattern.MatchString(n) }
