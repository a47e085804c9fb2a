package errgrpc

import (
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

// Row binds an error class to its wire form: an error for which
// errors.Is(err, Class) holds crosses as Code with the ErrorInfo reason
// Reason and the fixed Message.
type Row struct {
	Class   error
	Code    codes.Code
	Reason  string
	Message string
}

// The shared reasons of the errdefs classes: one vocabulary describes
// outcomes on every boundary of Berth.
const (
	ReasonInvalid                = "invalid"
	ReasonOwnership              = "ownership"
	ReasonExists                 = "exists"
	ReasonNotFound               = "not_found"
	ReasonCommandUnconfirmed     = "command_unconfirmed"
	ReasonComputeUnconfirmed     = "compute_unconfirmed"
	ReasonUnsupported            = "unsupported"
	ReasonObservationUnavailable = "observation_unavailable"
	ReasonRuntimeNotRunning      = "runtime_not_running"
	ReasonProtocolMismatch       = "protocol_mismatch"
	ReasonFenced                 = "fenced"
)

// The ErrorInfo metadata keys. Their values are authored names only.
const (
	// MetadataField names the invalid field of an invalid error.
	MetadataField = "field"
	// MetadataOperation names the provider operation of an unsupported
	// error.
	MetadataOperation = "operation"
	// MetadataReason is the declaration's reason code of an unsupported
	// error.
	MetadataReason = "reason"
)

// common is the shared precedence table of the errdefs classes: an error of
// several classes crosses as the first. Unknown outcomes come first because
// they never permit a retry or a release; fencing and version rejection
// next because they are decided before anything else is touched.
var common = []Row{
	{errdefs.ErrCommandUnconfirmed, codes.Unknown, ReasonCommandUnconfirmed, "command completion unconfirmed"},
	{errdefs.ErrComputeUnconfirmed, codes.Unknown, ReasonComputeUnconfirmed, "compute outcome unconfirmed"},
	{errdefs.ErrFenced, codes.FailedPrecondition, ReasonFenced, "fenced"},
	{errdefs.ErrProtocolMismatch, codes.FailedPrecondition, ReasonProtocolMismatch, "protocol mismatch"},
	{errdefs.ErrUnsupported, codes.Unimplemented, ReasonUnsupported, "unsupported operation"},
	{errdefs.ErrInvalid, codes.InvalidArgument, ReasonInvalid, "invalid argument"},
	{errdefs.ErrOwnership, codes.FailedPrecondition, ReasonOwnership, "ownership mismatch"},
	{errdefs.ErrExists, codes.AlreadyExists, ReasonExists, "already exists"},
	{errdefs.ErrNotFound, codes.NotFound, ReasonNotFound, "not found"},
	{errdefs.ErrRuntimeNotRunning, codes.FailedPrecondition, ReasonRuntimeNotRunning, "runtime not running"},
	{errdefs.ErrObservationUnavailable, codes.Unavailable, ReasonObservationUnavailable, "observation unavailable"},
}

// Common returns a copy of the shared precedence table. A boundary that
// speaks in errdefs classes starts its table with it and appends only its
// own rows.
func Common() []Row { return append([]Row(nil), common...) }

// Options are what differs between boundaries beyond their rows.
type Options struct {
	// Unknown is the row of an error of no known class (the admin API's
	// internal error, the node protocol's unknown outcome). Required.
	Unknown Row
	// FieldDetails makes an invalid error that names a field of safe form
	// also carry a google.rpc.BadRequest field violation and name the field
	// and its reason in the message ("invalid ttl: must be between ...").
	// Without it only the ErrorInfo metadata names the field.
	FieldDetails bool
	// Refusals lets an errdefs.Refusal cross with its own reason and
	// message (both of safe form) instead of its class's.
	Refusals bool
	// StrictUnsupported sends an unsupported error as the unknown row
	// unless it is a providercontract.UnsupportedError that Operation
	// accepts; otherwise such an error crosses without its metadata.
	StrictUnsupported bool
	// Operation decides whether an unsupported error may name its
	// operation; nil accepts any name of safe form.
	Operation func(providercontract.Operation) bool
}

// Codec converts errors to statuses for one boundary: one ErrorInfo
// domain, one precedence table, one form for every status it makes.
type Codec struct {
	domain   string
	rows     []Row
	byReason map[string]Row
	opts     Options
}

// New returns the codec of domain with rows in precedence order. It panics
// on a table that breaks its own rules (a duplicate reason, a row without
// a class, a reason of unsafe form), which is a bug of the caller.
func New(domain string, rows []Row, opts Options) *Codec {
	c := &Codec{domain: domain, rows: append([]Row(nil), rows...), byReason: make(map[string]Row), opts: opts}
	for _, r := range c.rows {
		if _, dup := c.byReason[r.Reason]; dup || r.Class == nil || !safeReason(r.Reason) || r.Code == codes.OK {
			panic("errgrpc: bad row " + r.Reason + " in domain " + domain)
		}
		c.byReason[r.Reason] = r
	}
	// The unknown row may share a row's reason and code (the node
	// protocol's unknown outcome is compute_unconfirmed; the Runtime
	// gateway's is "not admitted", with a message of its own).
	u := opts.Unknown
	if prev, ok := c.byReason[u.Reason]; (ok && prev.Code != u.Code) || !safeReason(u.Reason) || u.Code == codes.OK {
		panic("errgrpc: bad unknown row " + u.Reason + " in domain " + domain)
	} else if !ok {
		c.byReason[u.Reason] = u
	}
	return c
}

// Domain returns the codec's ErrorInfo domain.
func (c *Codec) Domain() string { return c.domain }

// Lookup returns the row of reason.
func (c *Codec) Lookup(reason string) (Row, bool) {
	r, ok := c.byReason[reason]
	return r, ok
}

// Error is an error already in a codec's wire form. ToStatus passes it
// through unchanged, so converting twice is harmless.
type Error struct {
	domain string
	st     *status.Status
}

func (e *Error) Error() string { return e.st.Message() }

// GRPCStatus returns the status, for grpc's status.FromError.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// ToStatus converts err to the boundary's status error, once: an *Error of
// this domain passes through; otherwise Encode(err, Unknown). nil returns
// nil.
func (c *Codec) ToStatus(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && e.domain == c.domain {
		return e
	}
	return c.Err(c.Encode(err, c.opts.Unknown))
}

// Owns reports whether err is already in this codec's form (an *Error of
// its domain).
func (c *Codec) Owns(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.domain == c.domain
}

// Err wraps st as an *Error of this codec.
func (c *Codec) Err(st *status.Status) error { return &Error{domain: c.domain, st: st} }

// Encode returns the status of err under the first row whose class err is,
// or under unknown when none is. err's text never crosses: the message is
// the row's, a Refusal's (Options.Refusals) or, for a safe field error,
// the field and its authored reason (Options.FieldDetails). more details
// follow the ErrorInfo.
func (c *Codec) Encode(err error, unknown Row, more ...proto.Message) *status.Status {
	for _, r := range c.rows {
		if !errors.Is(err, r.Class) {
			continue
		}
		switch {
		case isClass(r, errdefs.ErrInvalid):
			// An invalid-argument refusal (a rule of the input, not one
			// field's form) crosses with its own reason, like any refusal.
			if rf, ok := errdefs.AsRefusal(err); ok && c.opts.Refusals && safeReason(rf.Reason) && SafeMessage(rf.Message) {
				r.Reason, r.Message = rf.Reason, rf.Message
				return c.Build(r, nil, more...)
			}
			return c.invalid(r, err, more)
		case isClass(r, errdefs.ErrUnsupported):
			var ue *providercontract.UnsupportedError
			if errors.As(err, &ue) && c.operationOK(ue.Operation) && ue.Code.Valid() {
				return c.Build(r, map[string]string{
					MetadataOperation: string(ue.Operation), MetadataReason: string(ue.Code),
				}, more...)
			}
			if c.opts.StrictUnsupported {
				return c.Build(unknown, nil, more...)
			}
		default:
			if rf, ok := errdefs.AsRefusal(err); ok && c.opts.Refusals && safeReason(rf.Reason) && SafeMessage(rf.Message) {
				r.Reason, r.Message = rf.Reason, rf.Message
			}
		}
		return c.Build(r, nil, more...)
	}
	return c.Build(unknown, nil, more...)
}

func (c *Codec) operationOK(op providercontract.Operation) bool {
	if c.opts.Operation != nil {
		return c.opts.Operation(op)
	}
	return namePattern.MatchString(string(op))
}

func (c *Codec) invalid(r Row, err error, more []proto.Message) *status.Status {
	field, ok := errdefs.Field(err)
	if !ok || !SafeField(field) {
		return c.Build(r, nil, more...)
	}
	md := map[string]string{MetadataField: field}
	if !c.opts.FieldDetails {
		return c.Build(r, md, more...)
	}
	var fe *errdefs.FieldError
	errors.As(err, &fe)
	reason := fe.Reason
	if !SafeMessage(reason) {
		reason = "invalid"
	}
	r.Message = "invalid " + field + ": " + reason
	return c.Build(r, md, append([]proto.Message{&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: reason}},
	}}, more...)...)
}

// Build makes the one status form of r: its code and message, one
// ErrorInfo (reason r.Reason, this domain, md) and the further details,
// marshalled deterministically so one error always crosses as the same
// bytes. A detail that cannot be marshalled (these messages always can)
// ends the list; without its ErrorInfo a client reads the status as not
// of this codec.
func (c *Codec) Build(r Row, md map[string]string, more ...proto.Message) *status.Status {
	details := append([]proto.Message{&errdetails.ErrorInfo{Reason: r.Reason, Domain: c.domain, Metadata: md}}, more...)
	p := &spb.Status{Code: int32(r.Code), Message: r.Message}
	for _, d := range details {
		a := new(anypb.Any)
		if err := anypb.MarshalFrom(a, d, proto.MarshalOptions{Deterministic: true}); err != nil {
			break
		}
		p.Details = append(p.Details, a)
	}
	return status.FromProto(p)
}

// Decoded is a status in a codec's form.
type Decoded struct {
	// Row is the row of the status's reason.
	Row Row
	// Field is the invalid field the status named, "" when none.
	Field string
	// Operation and UnsupportedReason are an unsupported status's
	// metadata.
	Operation         providercontract.Operation
	UnsupportedReason providercontract.ReasonCode
	// Details are the details besides the ErrorInfo and a BadRequest, in
	// order, for the boundary to check.
	Details []any
}

// Decode reads a status in this codec's form: exactly one ErrorInfo of the
// domain whose reason is a row of the table (refusal reasons are not
// decoded: a client reads them as the status's code), the gRPC code of that
// row, and only the metadata that row allows, with values of safe form.
// Anything else is not the codec's.
func (c *Codec) Decode(st *status.Status) (Decoded, bool) {
	var (
		d    Decoded
		info *errdetails.ErrorInfo
	)
	if st == nil {
		return d, false
	}
	for _, detail := range st.Details() {
		switch m := detail.(type) {
		case *errdetails.ErrorInfo:
			if info != nil || m.GetDomain() != c.domain {
				return d, false
			}
			info = m
		case *errdetails.BadRequest:
		default:
			d.Details = append(d.Details, detail)
		}
	}
	if info == nil {
		return d, false
	}
	r, ok := c.byReason[info.GetReason()]
	if !ok || st.Code() != r.Code {
		return d, false
	}
	d.Row = r
	md := info.GetMetadata()
	switch {
	case isClass(r, errdefs.ErrUnsupported):
		if len(md) == 0 && !c.opts.StrictUnsupported {
			break
		}
		d.Operation = providercontract.Operation(md[MetadataOperation])
		d.UnsupportedReason = providercontract.ReasonCode(md[MetadataReason])
		if len(md) != 2 || !c.operationOK(d.Operation) || !d.UnsupportedReason.Valid() {
			return d, false
		}
	case isClass(r, errdefs.ErrInvalid):
		f, has := md[MetadataField]
		if len(md) > 1 || (len(md) == 1 && (!has || !SafeField(f))) {
			return d, false
		}
		d.Field = f
	default:
		if len(md) != 0 {
			return d, false
		}
	}
	return d, true
}

// isClass reports whether r is a row of class (its sentinel is, or wraps,
// class).
func isClass(r Row, class error) bool { return r.Class != nil && errors.Is(r.Class, class) }

// Metadata returns the ErrorInfo metadata of d, for rebuilding it.
func (d Decoded) Metadata() map[string]string {
	switch {
	case isClass(d.Row, errdefs.ErrUnsupported) && d.Operation != "":
		return map[string]string{MetadataOperation: string(d.Operation), MetadataReason: string(d.UnsupportedReason)}
	case d.Field != "":
		return map[string]string{MetadataField: d.Field}
	}
	return nil
}

// fieldPattern is the authored form of a field path: dotted lowercase
// snake_case names with optional list indexes ("turn.command.argv[0]").
var fieldPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\[[0-9]{1,6}\])?(\.[a-z][a-z0-9_]*(\[[0-9]{1,6}\])?)*$`)

// messagePattern is the authored form of a message or a field error's
// reason: a short phrase starting in lowercase. Anything else (which would
// be a bug) is replaced, so a submitted value can never cross in one.
var messagePattern = regexp.MustCompile(`^[a-z0-9][A-Za-z0-9 _.,;:()'{}/-]{0,159}$`)

// reasonPattern is the form of an ErrorInfo reason.
var reasonPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// namePattern is the form of a provider operation name ("RunCommand").
var namePattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,63}$`)

// MaxFieldLen bounds a field path that may cross.
const MaxFieldLen = 128

// SafeField reports whether f has the authored form of a field path and
// may cross a boundary.
func SafeField(f string) bool { return len(f) <= MaxFieldLen && fieldPattern.MatchString(f) }

// SafeMessage reports whether m has the authored form of a message or of a
// field error's reason and may cross a boundary.
func SafeMessage(m string) bool { return messagePattern.MatchString(m) }
func safeReason(r string) bool  { return reasonPattern.MatchString(r) }
