package nodewire

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/platform/errgrpc"
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
	CodeInvalid                Code = errgrpc.ReasonInvalid
	CodeOwnership              Code = errgrpc.ReasonOwnership
	CodeExists                 Code = errgrpc.ReasonExists
	CodeNotFound               Code = errgrpc.ReasonNotFound
	CodeCommandUnconfirmed     Code = errgrpc.ReasonCommandUnconfirmed
	CodeComputeUnconfirmed     Code = errgrpc.ReasonComputeUnconfirmed
	CodeUnsupported            Code = errgrpc.ReasonUnsupported
	CodeObservationUnavailable Code = errgrpc.ReasonObservationUnavailable
	CodeRuntimeNotRunning      Code = errgrpc.ReasonRuntimeNotRunning
	CodeProtocolMismatch       Code = errgrpc.ReasonProtocolMismatch
	CodeFenced                 Code = errgrpc.ReasonFenced
)

// The ErrorInfo metadata keys. Their values are authored names only.
const (
	// MetadataField names the invalid field of an invalid error.
	MetadataField = errgrpc.MetadataField
	// MetadataOperation names the operation of an unsupported error.
	MetadataOperation = errgrpc.MetadataOperation
	// MetadataReason is the declaration's reason code of an unsupported
	// error.
	MetadataReason = errgrpc.MetadataReason
)

// codec is the node protocol's one codec: the shared table of errgrpc and
// no row of its own. An error of no known class is the operation's unknown
// outcome (unknownRow); an unsupported error crosses only as the typed
// error of an operation of the contract's inventory. Refusals are not
// sent: the protocol's codes are fixed.
var codec = errgrpc.New(pb.ErrorDomain, errgrpc.Common(), errgrpc.Options{
	Unknown:           unknownRow(""),
	StrictUnsupported: true,
	Operation:         func(op providercontract.Operation) bool { return inventory[op] },
})

// Codes returns every wire code in precedence order.
func Codes() []Code {
	rows := errgrpc.Common()
	out := make([]Code, len(rows))
	for i, r := range rows {
		out[i] = Code(r.Reason)
	}
	return out
}

// GRPCCode returns the gRPC status code a wire code travels with, and
// whether c is a wire code.
func GRPCCode(c Code) (codes.Code, bool) {
	r, ok := codec.Lookup(string(c))
	return r.Code, ok
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

// requiredOps is the set of the operations every provider supports (the
// RuleRequired contract, sandbox.SandboxProvider): an unsupported answer
// for one of them breaks the contract.
var requiredOps = func() map[providercontract.Operation]bool {
	m := make(map[providercontract.Operation]bool)
	for _, c := range sandbox.Inventory() {
		if c.Rule == providercontract.RuleRequired {
			for _, op := range c.Methods {
				m[op] = true
			}
		}
	}
	return m
}()

// errRequiredUnsupported is the class a client gives a node's unsupported
// answer for a required operation: a contract violation, never an
// UnsupportedError (the guide: the five required operations can never
// return it).
var errRequiredUnsupported = fmt.Errorf("unsupported answer for a required operation: %w", errdefs.ErrContract)

// unknownRow is the row of an error of no known class in op.
func unknownRow(op providercontract.Operation) errgrpc.Row {
	if IsCommand(op) {
		return commandUnconfirmedRow
	}
	return computeUnconfirmedRow
}

// The two unknown-outcome rows, found once in the shared table.
var computeUnconfirmedRow, commandUnconfirmedRow = sharedRow(CodeComputeUnconfirmed), sharedRow(CodeCommandUnconfirmed)

func sharedRow(code Code) errgrpc.Row {
	for _, r := range errgrpc.Common() {
		if r.Reason == string(code) {
			return r
		}
	}
	panic("nodewire: no shared row " + string(code))
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
	return build(d.Decoded, &info).Err()
}

func statusFor(op providercontract.Operation, err error) *status.Status {
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		if d, ok := decode(gs.GRPCStatus()); ok {
			if errors.Is(d.Row.Class, errdefs.ErrUnsupported) && op != "" && d.Operation != op {
				return codec.Build(unknownRow(op), nil)
			}
			return build(d.Decoded, d.failure)
		}
	}
	var ue *providercontract.UnsupportedError
	if errors.As(err, &ue) && ((op != "" && ue.Operation != op) || requiredOps[ue.Operation]) {
		// For another operation, or for a required one: the adapter broke
		// the contract, so the outcome is unknown.
		return codec.Build(unknownRow(op), nil)
	}
	return codec.Encode(err, unknownRow(op))
}

// build rebuilds a decoded status with its settlement evidence, if any. An
// Info that InfoToWire rejects is left off.
func build(d errgrpc.Decoded, failure *sandbox.Info) *status.Status {
	if failure != nil {
		if m, err := InfoToWire(*failure); err == nil {
			return codec.Build(d.Row, d.Metadata(), &pb.CreateFailure{Info: m})
		}
	}
	return codec.Build(d.Row, d.Metadata())
}

// decoded is a status in this package's form.
type decoded struct {
	errgrpc.Decoded
	// failure is a CreateFailure's non-zero Info, nil without one.
	failure *sandbox.Info
}

// decode reads a status in this package's form: the codec's form with at
// most one valid CreateFailure besides. Anything else is not ours.
func decode(st *status.Status) (decoded, bool) {
	var d decoded
	cd, ok := codec.Decode(st)
	if !ok {
		return d, false
	}
	d.Decoded = cd
	var cf *pb.CreateFailure
	for _, detail := range cd.Details {
		m, ok := detail.(*pb.CreateFailure)
		if !ok || cf != nil {
			return d, false
		}
		cf = m
	}
	if hasBadRequest(st) {
		return d, false
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

// hasBadRequest reports whether st carries a BadRequest detail, which the
// node protocol never sends.
func hasBadRequest(st *status.Status) bool {
	for _, detail := range st.Details() {
		if _, ok := detail.(*errdetails.BadRequest); ok {
			return true
		}
	}
	return false
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
	e := &Error{Operation: op, Code: Code(d.Row.Reason), GRPCCode: st.Code(), class: d.Row.Class}
	switch e.Code {
	case CodeInvalid:
		if d.Field != "" {
			e.class = errdefs.Invalid(d.Field, "rejected by the node")
		}
	case CodeUnsupported:
		if d.Operation != op {
			return &Error{
				Operation: op, GRPCCode: st.Code(),
				detail: "unsupported answer for another operation",
				class:  UnknownOutcome(op),
			}
		}
		if requiredOps[op] {
			e.class = errRequiredUnsupported
			break
		}
		e.class = &providercontract.UnsupportedError{Operation: op, Code: d.UnsupportedReason}
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

// TargetErrorToWire is one target's error in a batched answer
// (ObserveBatch): exactly the status ToStatusFor(op, err) makes for a
// failed call of op on that target alone, as its code, wire code and
// ErrorInfo metadata. A nil err returns nil.
func TargetErrorToWire(op providercontract.Operation, err error) *pb.TargetError {
	if err == nil {
		return nil
	}
	// statusFor builds only the codec's form, so the decode holds.
	st := statusFor(op, err)
	d, _ := codec.Decode(st)
	return &pb.TargetError{Code: int32(st.Code()), Reason: d.Row.Reason, Metadata: d.Metadata()}
}

// TargetErrorFromWire is FromError(op, ...) for one target's error of a
// batched answer: the status it stands for, decoded and checked exactly as
// a failed call's. A nil or OK error, or one not in the protocol's form,
// is op's unknown outcome: a target's error never reads as success.
func TargetErrorFromWire(op providercontract.Operation, m *pb.TargetError) error {
	if m == nil || codes.Code(m.GetCode()) == codes.OK {
		return MalformedResponse(op, required("error"))
	}
	row := errgrpc.Row{Code: codes.Code(m.GetCode()), Reason: m.GetReason(), Message: "target error"}
	return FromError(op, codec.Build(row, m.GetMetadata()).Err())
}
