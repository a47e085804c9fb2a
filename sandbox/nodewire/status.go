package nodewire

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Code is one of the node protocol's fixed wire error codes, the reason of
// the ErrorInfo in a failed call's status.
type Code string

// The wire codes (DESIGN.md, "Protocols"). There is no code for
// errdefs.ErrContract: a provider that breaks the contract has produced an
// unknown outcome, so it crosses as compute_unconfirmed (command_unconfirmed
// for a command operation), like any error of no known class.
const (
	CodeInvalid                Code = "invalid"
	CodeOwnership              Code = "ownership"
	CodeExists                 Code = "exists"
	CodeNotFound               Code = "not_found"
	CodeCommandUnconfirmed     Code = "command_unconfirmed"
	CodeComputeUnconfirmed     Code = "compute_unconfirmed"
	CodeUnsupported            Code = "unsupported"
	CodeObservationUnavailable Code = "observation_unavailable"
	CodeRuntimeNotRunning      Code = "runtime_not_running"
	CodeProtocolMismatch       Code = "protocol_mismatch"
	CodeFenced                 Code = "fenced"
)

// The ErrorInfo metadata keys. Their values are authored names only.
const (
	// MetadataField names the invalid field of an invalid error.
	MetadataField = "field"
	// MetadataOperation names the operation of an unsupported error.
	MetadataOperation = "operation"
	// MetadataReason is the declaration's reason code of an unsupported
	// error.
	MetadataReason = "reason"
)

// wireClass binds a wire code to its gRPC code, its fixed status message and
// its errdefs class.
type wireClass struct {
	code    Code
	grpc    codes.Code
	message string
	class   error
}

// classes is in precedence order: an error of several classes crosses as
// the first. The unknown outcomes come first because they never permit a
// retry or a release; fencing and version rejection come next because they
// are decided before the adapter is touched.
var classes = []wireClass{
	{CodeCommandUnconfirmed, codes.Unknown, "command completion unconfirmed", errdefs.ErrCommandUnconfirmed},
	{CodeComputeUnconfirmed, codes.Unknown, "compute outcome unconfirmed", errdefs.ErrComputeUnconfirmed},
	{CodeFenced, codes.FailedPrecondition, "fenced", errdefs.ErrFenced},
	{CodeProtocolMismatch, codes.FailedPrecondition, "protocol mismatch", errdefs.ErrProtocolMismatch},
	{CodeUnsupported, codes.Unimplemented, "unsupported operation", errdefs.ErrUnsupported},
	{CodeInvalid, codes.InvalidArgument, "invalid argument", errdefs.ErrInvalid},
	{CodeOwnership, codes.FailedPrecondition, "ownership mismatch", errdefs.ErrOwnership},
	{CodeExists, codes.AlreadyExists, "already exists", errdefs.ErrExists},
	{CodeNotFound, codes.NotFound, "not found", errdefs.ErrNotFound},
	{CodeRuntimeNotRunning, codes.FailedPrecondition, "runtime not running", errdefs.ErrRuntimeNotRunning},
	{CodeObservationUnavailable, codes.Unavailable, "observation unavailable", errdefs.ErrObservationUnavailable},
}

var byCode = func() map[Code]wireClass {
	m := make(map[Code]wireClass, len(classes))
	for _, c := range classes {
		m[c.code] = c
	}
	return m
}()

// Codes returns every wire code in precedence order.
func Codes() []Code {
	out := make([]Code, len(classes))
	for i, c := range classes {
		out[i] = c.code
	}
	return out
}

// GRPCCode returns the gRPC status code a wire code travels with, and
// whether c is a wire code.
func GRPCCode(c Code) (codes.Code, bool) {
	w, ok := byCode[c]
	return w.grpc, ok
}

// inventory is the set of every contract operation name.
var inventory = func() map[providercontract.Operation]bool {
	m := make(map[providercontract.Operation]bool)
	for _, c := range sandbox.Inventory() {
		for _, op := range c.Methods {
			m[op] = true
		}
	}
	return m
}()

// unknownCode is the wire code of an error of no known class in op.
func unknownCode(op providercontract.Operation) Code {
	if IsCommand(op) {
		return CodeCommandUnconfirmed
	}
	return CodeComputeUnconfirmed
}

// ToStatus is ToStatusFor for a caller that does not name the operation:
// an error of no known class becomes compute_unconfirmed.
func ToStatus(err error) error { return ToStatusFor("", err) }

// ToStatusFor converts the error of the server's call of op into a gRPC
// status error, once, at the boundary. The status has the code's gRPC code,
// a fixed message and one ErrorInfo (reason the code, domain
// sandboxnodev1.ErrorDomain); err's text never crosses. An invalid error
// that names a field of safe form sends it as metadata "field"; an
// UnsupportedError sends "operation" and "reason".
//
// An error of no known class, an ErrContract, a bare ErrUnsupported without
// the typed error, or an UnsupportedError for another operation than op (or
// with an unsafe operation or reason) becomes compute_unconfirmed, or
// command_unconfirmed when op is a command operation. A status this package
// produced passes through (rebuilt, so only its fixed form survives); any
// other gRPC status is an error of no known class. A nil err returns nil.
func ToStatusFor(op providercontract.Operation, err error) error {
	if err == nil {
		return nil
	}
	return statusFor(op, err).Err()
}

// CreateStatus is ToStatusFor(Create, err) for a failed Create that
// returned settlement evidence: when info is not the zero Info it is
// attached as a sandboxnodev1.CreateFailure detail. An info that
// InfoToWire rejects is left off (the evidence would break the contract).
// A nil err returns nil: a Create that succeeded answers with its response.
func CreateStatus(info sandbox.Info, err error) error {
	if err == nil {
		return nil
	}
	st := statusFor(sandbox.OpCreate, err)
	if info == (sandbox.Info{}) {
		return st.Err()
	}
	d, ok := decode(st)
	if !ok || d.failure != nil {
		return st.Err()
	}
	return build(d.class, d.metadata(), &info).Err()
}

func statusFor(op providercontract.Operation, err error) *status.Status {
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		if d, ok := decode(gs.GRPCStatus()); ok {
			if d.class.code == CodeUnsupported && op != "" && d.operation != op {
				return build(byCode[unknownCode(op)], nil, nil)
			}
			return build(d.class, d.metadata(), d.failure)
		}
	}
	for _, w := range classes {
		if !errors.Is(err, w.class) {
			continue
		}
		switch w.code {
		case CodeUnsupported:
			var ue *providercontract.UnsupportedError
			if !errors.As(err, &ue) || !inventory[ue.Operation] || !ue.Code.Valid() ||
				(op != "" && ue.Operation != op) {
				return build(byCode[unknownCode(op)], nil, nil)
			}
			return build(w, map[string]string{
				MetadataOperation: string(ue.Operation), MetadataReason: string(ue.Code),
			}, nil)
		case CodeInvalid:
			if f, ok := errdefs.Field(err); ok && safeField(f) {
				return build(w, map[string]string{MetadataField: f}, nil)
			}
		}
		return build(w, nil, nil)
	}
	return build(byCode[unknownCode(op)], nil, nil)
}

// build makes the one status form of w. The details are marshalled
// deterministically, so one error always crosses as the same bytes. A
// detail that cannot be marshalled (these messages always can) is left
// off; without its ErrorInfo a client reads the status as an unknown
// outcome.
func build(w wireClass, md map[string]string, failure *sandbox.Info) *status.Status {
	details := []proto.Message{&errdetails.ErrorInfo{Reason: string(w.code), Domain: pb.ErrorDomain, Metadata: md}}
	if failure != nil {
		if m, err := InfoToWire(*failure); err == nil {
			details = append(details, &pb.CreateFailure{Info: m})
		}
	}
	p := &spb.Status{Code: int32(w.grpc), Message: w.message}
	for _, d := range details {
		a := new(anypb.Any)
		if err := anypb.MarshalFrom(a, d, proto.MarshalOptions{Deterministic: true}); err != nil {
			break
		}
		p.Details = append(p.Details, a)
	}
	return status.FromProto(p)
}

// decoded is a status in this package's form.
type decoded struct {
	class     wireClass
	field     string
	operation providercontract.Operation
	reason    providercontract.ReasonCode
	// failure is a CreateFailure's non-zero Info, nil without one.
	failure *sandbox.Info
}

func (d decoded) metadata() map[string]string {
	switch {
	case d.class.code == CodeUnsupported:
		return map[string]string{MetadataOperation: string(d.operation), MetadataReason: string(d.reason)}
	case d.field != "":
		return map[string]string{MetadataField: d.field}
	}
	return nil
}

// decode reads a status in this package's form: exactly one ErrorInfo of
// the protocol's domain with a known reason, the gRPC code of that reason,
// only the metadata that reason allows with values of safe form, and at
// most one valid CreateFailure besides. Anything else is not ours.
func decode(st *status.Status) (decoded, bool) {
	var (
		d    decoded
		info *errdetails.ErrorInfo
		cf   *pb.CreateFailure
	)
	if st == nil {
		return d, false
	}
	for _, detail := range st.Details() {
		switch m := detail.(type) {
		case *errdetails.ErrorInfo:
			if info != nil || m.GetDomain() != pb.ErrorDomain {
				return d, false
			}
			info = m
		case *pb.CreateFailure:
			if cf != nil {
				return d, false
			}
			cf = m
		default:
			return d, false
		}
	}
	if info == nil {
		return d, false
	}
	w, ok := byCode[Code(info.GetReason())]
	if !ok || st.Code() != w.grpc {
		return d, false
	}
	d.class = w
	md := info.GetMetadata()
	switch w.code {
	case CodeUnsupported:
		d.operation = providercontract.Operation(md[MetadataOperation])
		d.reason = providercontract.ReasonCode(md[MetadataReason])
		if len(md) != 2 || !inventory[d.operation] || !d.reason.Valid() {
			return d, false
		}
	case CodeInvalid:
		f, has := md[MetadataField]
		if len(md) > 1 || (len(md) == 1 && (!has || !safeField(f))) {
			return d, false
		}
		d.field = f
	default:
		if len(md) != 0 {
			return d, false
		}
	}
	if cf != nil {
		i, err := InfoFromWire(cf.GetInfo())
		if err != nil {
			return d, false
		}
		if i != (sandbox.Info{}) {
			d.failure = &i
		}
	}
	return d, true
}

// Error is a failed node call as the client sees it. It unwraps to its
// errdefs class (for invalid, an errdefs.FieldError when the node named the
// field; for unsupported, the providercontract.UnsupportedError), so callers
// test it with errors.Is and errors.As like any other error. Its text holds
// only the operation, fixed phrases and authored names.
type Error struct {
	// Operation is the operation the client called.
	Operation providercontract.Operation
	// Code is the wire code the node sent, or "" when the failure carried
	// none: a transport failure, a deadline, a cancellation, a status not in
	// this package's form, or a malformed response.
	Code Code
	// GRPCCode is the status code received (codes.Unknown for an error that
	// is no status, codes.OK for a malformed response).
	GRPCCode codes.Code
	detail   string
	class    error
}

func (e *Error) Error() string {
	msg := "sandbox node " + string(e.Operation) + ": "
	if e.detail != "" {
		msg += e.detail + ": "
	}
	return msg + e.class.Error()
}

// Unwrap returns the error's class.
func (e *Error) Unwrap() error { return e.class }

// FromError converts the error of the client's call of op back into its
// errdefs class, once, at the boundary. A status in this package's form
// becomes its class: invalid becomes errdefs.Invalid(field, "rejected by
// the node") when the node named the field (errdefs.ErrInvalid otherwise);
// unsupported becomes &providercontract.UnsupportedError{op, reason}, but
// only when the node named op itself: an unsupported answer for another
// operation breaks the protocol and becomes op's unknown outcome.
//
// Everything else (codes.Unavailable, DeadlineExceeded, Canceled, Unknown
// without this package's ErrorInfo, a context error, any status of another
// form) is op's unknown outcome: ErrComputeUnconfirmed for a mutation (and
// an operation the protocol does not carry), ErrCommandUnconfirmed for a
// command, ErrObservationUnavailable for a read. See UnknownOutcome. A nil
// err returns nil.
func FromError(op providercontract.Operation, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Operation: op, GRPCCode: codes.Unknown, detail: "no status", class: UnknownOutcome(op)}
	}
	d, ok := decode(st)
	if !ok {
		return &Error{
			Operation: op, GRPCCode: st.Code(),
			detail: "status " + st.Code().String() + " without a protocol error code",
			class:  UnknownOutcome(op),
		}
	}
	e := &Error{Operation: op, Code: d.class.code, GRPCCode: st.Code(), class: d.class.class}
	switch d.class.code {
	case CodeInvalid:
		if d.field != "" {
			e.class = errdefs.Invalid(d.field, "rejected by the node")
		}
	case CodeUnsupported:
		if d.operation != op {
			return &Error{
				Operation: op, GRPCCode: st.Code(),
				detail: "unsupported answer for another operation",
				class:  UnknownOutcome(op),
			}
		}
		e.class = &providercontract.UnsupportedError{Operation: op, Code: d.reason}
	}
	return e
}

// CreateFailureInfo returns the settlement evidence a failed Create
// carried (see CreateStatus), and whether there was any. Only a status in
// this package's form counts; the caller still checks the Info against its
// Reference with sandbox.Info.CheckFor, and the evidence never turns the
// failure into success.
func CreateFailureInfo(err error) (sandbox.Info, bool) {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return sandbox.Info{}, false
	}
	d, ok := decode(st)
	if !ok || d.failure == nil {
		return sandbox.Info{}, false
	}
	return *d.failure, true
}
