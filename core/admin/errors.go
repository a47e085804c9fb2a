package admin

import (
	"context"
	"errors"
	"regexp"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/platform/errgrpc"
	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every admin API error
// (adminv1.ErrorDomain, where clients read it).
const ErrorDomain = adminv1.ErrorDomain

// Reason is the fixed google.rpc.ErrorInfo reason of an admin API error.
// The errdefs-derived reasons are the shared ones of errgrpc (the node
// protocol's wire codes), so one vocabulary describes outcomes across
// Berth. A refusal (errdefs.Refusal) crosses with its own specific reason
// ("node_enabled") instead of ReasonFailedPrecondition.
type Reason string

// The reasons.
const (
	ReasonInvalid                Reason = errgrpc.ReasonInvalid
	ReasonOwnership              Reason = errgrpc.ReasonOwnership
	ReasonExists                 Reason = errgrpc.ReasonExists
	ReasonNotFound               Reason = errgrpc.ReasonNotFound
	ReasonCommandUnconfirmed     Reason = errgrpc.ReasonCommandUnconfirmed
	ReasonComputeUnconfirmed     Reason = errgrpc.ReasonComputeUnconfirmed
	ReasonUnsupported            Reason = errgrpc.ReasonUnsupported
	ReasonObservationUnavailable Reason = errgrpc.ReasonObservationUnavailable
	ReasonRuntimeNotRunning      Reason = errgrpc.ReasonRuntimeNotRunning
	ReasonProtocolMismatch       Reason = errgrpc.ReasonProtocolMismatch
	ReasonFenced                 Reason = errgrpc.ReasonFenced
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
	MetadataField = errgrpc.MetadataField
	// MetadataOperation names the provider operation of an unsupported
	// error.
	MetadataOperation = errgrpc.MetadataOperation
	// MetadataReason is the declaration's reason code of an unsupported
	// error.
	MetadataReason = errgrpc.MetadataReason
)

// ErrInternal, ErrUnauthenticated and ErrUnimplemented are the classes a
// client decodes the admin API's own statuses to (Decode): Core's failure
// of no known class, a call without a valid admin token, a method this
// server does not serve. No errdefs class says any of them.
var (
	ErrInternal        = errors.New("internal error")
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrUnimplemented   = errors.New("unknown method")
)

// The admin API's own rows, after the shared ones.
var (
	failedPrecondition = errgrpc.Row{Class: errdefs.ErrFailedPrecondition, Code: codes.FailedPrecondition, Reason: string(ReasonFailedPrecondition), Message: "failed precondition"}
	cancelled          = errgrpc.Row{Class: context.Canceled, Code: codes.Canceled, Reason: string(ReasonCancelled), Message: "request cancelled"}
	deadline           = errgrpc.Row{Class: context.DeadlineExceeded, Code: codes.DeadlineExceeded, Reason: string(ReasonDeadlineExceeded), Message: "deadline exceeded"}
	internal           = errgrpc.Row{Class: ErrInternal, Code: codes.Internal, Reason: string(ReasonInternal), Message: "internal error"}
	unauthenticatedRow = errgrpc.Row{Class: ErrUnauthenticated, Code: codes.Unauthenticated, Reason: string(ReasonUnauthenticated), Message: "unauthenticated"}
	unimplementedRow   = errgrpc.Row{Class: ErrUnimplemented, Code: codes.Unimplemented, Reason: string(ReasonUnimplemented), Message: "unknown method"}
)

// codec is the admin API's one codec: the shared table, then
// failed_precondition, the two context ends and the server's own
// unauthenticated and unimplemented answers (no handler returns their
// classes: they are rows so that a client decodes them); everything else
// is internal. Refusals cross with their own reason and message, field
// errors with a google.rpc.BadRequest.
var codec = errgrpc.New(ErrorDomain,
	append(errgrpc.Common(), failedPrecondition, cancelled, deadline, unauthenticatedRow, unimplementedRow, permissionDeniedRow),
	errgrpc.Options{Unknown: internal, FieldDetails: true, Refusals: true})

// ToStatus is the one mapping from errors to the admin API's gRPC status;
// the server applies it once, in an interceptor, so handlers return plain
// errors:
//
//   - errdefs.ErrInvalid: INVALID_ARGUMENT; a FieldError adds a
//     google.rpc.BadRequest field violation naming the field, and the field
//     and its reason appear in the message when they have the authored
//     form (dotted snake_case paths, fixed phrases).
//   - ErrNotFound: NOT_FOUND. ErrExists: ALREADY_EXISTS.
//   - ErrOwnership, ErrFenced, ErrProtocolMismatch, ErrRuntimeNotRunning,
//     ErrFailedPrecondition: FAILED_PRECONDITION. An errdefs.Refusal
//     crosses with its own reason ("node_enabled") and message ("node is
//     enabled: retire it first"), which tell the operator what to do.
//   - ErrObservationUnavailable: UNAVAILABLE; a store call that met the
//     database unavailable crosses as core/store/pgerr's refusal
//     (database_unavailable, "retry once it is back").
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
// reason is a Reason or a refusal's. Messages are fixed: err.Error() never
// crosses. nil returns nil.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if s, ok := status.FromError(err); ok && !codec.Owns(err) {
		switch s.Code() {
		case codes.Canceled:
			return codec.Err(codec.Build(cancelled, nil))
		case codes.DeadlineExceeded:
			return codec.Err(codec.Build(deadline, nil))
		case codes.Unimplemented:
			// The generated Unimplemented*Server answer of a method a
			// registered service does not implement (yet).
			return unimplemented()
		}
	}
	return codec.ToStatus(err)
}

// unauthenticated is the status of a call without a valid admin token.
// message is one of the authored messages in auth.go.
func unauthenticated(message string) error {
	r := unauthenticatedRow
	r.Message = message
	return codec.Err(codec.Build(r, nil))
}

// unimplemented answers a method this server does not serve.
func unimplemented() error { return codec.Err(codec.Build(unimplementedRow, nil)) }

// refusalClasses are the classes a client gives a refusal by its code: a
// refusal crosses with its own reason, which no row of the codec holds.
var refusalClasses = map[codes.Code]error{
	codes.InvalidArgument:    errdefs.ErrInvalid,
	codes.FailedPrecondition: errdefs.ErrFailedPrecondition,
	codes.Unavailable:        errdefs.ErrObservationUnavailable,
}

// Decode is the client side of ToStatus: a status in the admin API's form
// becomes its class as an *errdefs.Refusal carrying the status's fixed
// reason and message, which a client prints as they are. A row's status
// decodes through the codec (errgrpc) to the row's class; a refusal (one
// ErrorInfo of the domain with a reason no row holds, no metadata, a
// message of authored form) to the class of its code. Anything else (the
// transport's statuses, another domain's) is not the admin API's: ok is
// false.
func Decode(st *status.Status) (r *errdefs.Refusal, ok bool) {
	if d, ok := codec.Decode(st); ok {
		return errdefs.Refuse(d.Row.Class, d.Row.Reason, st.Message()), true
	}
	class, ok := refusalClasses[st.Code()]
	if !ok || !errgrpc.SafeMessage(st.Message()) {
		return nil, false
	}
	var info *errdetails.ErrorInfo
	for _, detail := range st.Details() {
		m, isInfo := detail.(*errdetails.ErrorInfo)
		if !isInfo || info != nil {
			return nil, false
		}
		info = m
	}
	if info == nil || info.GetDomain() != ErrorDomain || len(info.GetMetadata()) != 0 || !reasonForm.MatchString(info.GetReason()) {
		return nil, false
	}
	return errdefs.Refuse(class, info.GetReason(), st.Message()), true
}

// reasonForm is the form of a refusal's reason: snake_case.
var reasonForm = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
