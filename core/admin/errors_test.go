package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/core/store/pgerr"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// secretText stands for native text or a credential that must never cross.
const secretText = "docker: container 3f9a... token=hunter2"

// decode returns the status of err and its ErrorInfo, BadRequest details.
func decode(t *testing.T, err error) (*status.Status, *errdetails.ErrorInfo, *errdetails.BadRequest) {
	t.Helper()
	s, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a status: %T", err)
	}
	var info *errdetails.ErrorInfo
	var br *errdetails.BadRequest
	for _, d := range s.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if info != nil {
				t.Fatalf("two ErrorInfo details")
			}
			info = d
		case *errdetails.BadRequest:
			br = d
		default:
			t.Fatalf("unexpected detail %T", d)
		}
	}
	if info == nil {
		t.Fatalf("status %v has no ErrorInfo", s.Code())
	}
	if info.GetDomain() != ErrorDomain {
		t.Fatalf("domain %q", info.GetDomain())
	}
	return s, info, br
}

func TestToStatusClasses(t *testing.T) {
	wrap := func(class error) error { return fmt.Errorf("%s: %w", secretText, class) }
	cases := []struct {
		name    string
		err     error
		code    codes.Code
		message string
		reason  Reason
	}{
		{"invalid", wrap(errdefs.ErrInvalid), codes.InvalidArgument, "invalid argument", ReasonInvalid},
		{"not found", wrap(errdefs.ErrNotFound), codes.NotFound, "not found", ReasonNotFound},
		{"exists", wrap(errdefs.ErrExists), codes.AlreadyExists, "already exists", ReasonExists},
		{"ownership", wrap(errdefs.ErrOwnership), codes.FailedPrecondition, "ownership mismatch", ReasonOwnership},
		{"fenced", wrap(errdefs.ErrFenced), codes.FailedPrecondition, "fenced", ReasonFenced},
		{"protocol mismatch", wrap(errdefs.ErrProtocolMismatch), codes.FailedPrecondition, "protocol mismatch", ReasonProtocolMismatch},
		{"runtime not running", wrap(errdefs.ErrRuntimeNotRunning), codes.FailedPrecondition, "runtime not running", ReasonRuntimeNotRunning},
		{"failed precondition", wrap(errdefs.ErrFailedPrecondition), codes.FailedPrecondition, "failed precondition", ReasonFailedPrecondition},
		{"observation unavailable", wrap(errdefs.ErrObservationUnavailable), codes.Unavailable, "observation unavailable", ReasonObservationUnavailable},
		// A store call that met the database down crosses as pgerr's
		// refusal, which names the database, not as the class's generic
		// reason the admin API also reports for a node's compute.
		{"database unavailable", fmt.Errorf("create session: %w", pgerr.Classify(io.ErrUnexpectedEOF)), codes.Unavailable, pgerr.ErrDatabaseUnavailable.Message, "database_unavailable"},
		{"unsupported class", wrap(errdefs.ErrUnsupported), codes.Unimplemented, "unsupported operation", ReasonUnsupported},
		{"compute unconfirmed", wrap(errdefs.ErrComputeUnconfirmed), codes.Unknown, "compute outcome unconfirmed", ReasonComputeUnconfirmed},
		{"command unconfirmed", wrap(errdefs.ErrCommandUnconfirmed), codes.Unknown, "command completion unconfirmed", ReasonCommandUnconfirmed},
		{"contract", wrap(errdefs.ErrContract), codes.Internal, "internal error", ReasonInternal},
		{"unknown", errors.New(secretText), codes.Internal, "internal error", ReasonInternal},
		{"foreign status", status.Error(codes.NotFound, secretText), codes.Internal, "internal error", ReasonInternal},
		{"foreign permission status", status.Error(codes.PermissionDenied, secretText), codes.Internal, "internal error", ReasonInternal},
		{"context cancelled", wrap(context.Canceled), codes.Canceled, "request cancelled", ReasonCancelled},
		{"context deadline", wrap(context.DeadlineExceeded), codes.DeadlineExceeded, "deadline exceeded", ReasonDeadlineExceeded},
		{"transport cancelled", status.Error(codes.Canceled, secretText), codes.Canceled, "request cancelled", ReasonCancelled},
		{"generated unimplemented", status.Error(codes.Unimplemented, "method GetTurn not implemented"), codes.Unimplemented, "unknown method", ReasonUnimplemented},
		{"transport deadline", status.Error(codes.DeadlineExceeded, secretText), codes.DeadlineExceeded, "deadline exceeded", ReasonDeadlineExceeded},
		// An error of several classes crosses as the first in precedence.
		{"unconfirmed beats not found", errors.Join(errdefs.ErrNotFound, errdefs.ErrComputeUnconfirmed), codes.Unknown, "compute outcome unconfirmed", ReasonComputeUnconfirmed},
		{"fenced beats invalid", errors.Join(errdefs.Invalid("name", "required"), errdefs.ErrFenced), codes.FailedPrecondition, "fenced", ReasonFenced},
		{"class beats context", errors.Join(context.DeadlineExceeded, errdefs.ErrObservationUnavailable), codes.Unavailable, "observation unavailable", ReasonObservationUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ToStatus(tc.err)
			s, info, br := decode(t, err)
			if s.Code() != tc.code || s.Message() != tc.message || Reason(info.GetReason()) != tc.reason {
				t.Fatalf("got %v %q %q, want %v %q %q", s.Code(), s.Message(), info.GetReason(), tc.code, tc.message, tc.reason)
			}
			if br != nil {
				t.Fatalf("unexpected BadRequest")
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(fmt.Sprint(s.Proto()), "hunter2") {
				t.Fatalf("native text crossed")
			}
		})
	}
}

func TestToStatusNil(t *testing.T) {
	if ToStatus(nil) != nil {
		t.Fatal("nil error must stay nil")
	}
}

func TestToStatusFieldError(t *testing.T) {
	err := ToStatus(fmt.Errorf("create session %s: %w", secretText, errdefs.Invalid("session.display_name", "too long")))
	s, info, br := decode(t, err)
	if s.Code() != codes.InvalidArgument || s.Message() != "invalid session.display_name: too long" {
		t.Fatalf("got %v %q", s.Code(), s.Message())
	}
	if info.GetReason() != string(ReasonInvalid) || info.GetMetadata()[MetadataField] != "session.display_name" {
		t.Fatalf("ErrorInfo %v", info)
	}
	if br == nil || len(br.GetFieldViolations()) != 1 {
		t.Fatalf("BadRequest %v", br)
	}
	v := br.GetFieldViolations()[0]
	if v.GetField() != "session.display_name" || v.GetDescription() != "too long" {
		t.Fatalf("violation %v", v)
	}
}

func TestToStatusFieldErrorNeverEchoesUnauthoredText(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		message   string
		field     string
		violation string
	}{
		// A field that is not an authored path (here: carrying a value) is
		// dropped entirely.
		{"value in field", errdefs.Invalid("env.hunter2=1", "required"), "invalid argument", "", ""},
		{"empty field", errdefs.Invalid("", "required"), "invalid argument", "", ""},
		{"long field", errdefs.Invalid(strings.Repeat("a", 129), "required"), "invalid argument", "", ""},
		// A reason that is not an authored phrase is replaced.
		{"value in reason", errdefs.Invalid("name", "got \"hunter2\""), "invalid name: invalid", "name", "invalid"},
		{"newline in reason", errdefs.Invalid("name", "bad\nhunter2"), "invalid name: invalid", "name", "invalid"},
		{"indexed field", errdefs.Invalid("turn.command.argv.args[3]", "required"), "invalid turn.command.argv.args[3]: required", "turn.command.argv.args[3]", "required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, info, br := decode(t, ToStatus(tc.err))
			if s.Code() != codes.InvalidArgument || s.Message() != tc.message {
				t.Fatalf("got %v %q", s.Code(), s.Message())
			}
			if info.GetMetadata()[MetadataField] != tc.field {
				t.Fatalf("field metadata %q", info.GetMetadata()[MetadataField])
			}
			if tc.field == "" {
				if br != nil {
					t.Fatalf("unexpected BadRequest")
				}
			} else if v := br.GetFieldViolations(); len(v) != 1 || v[0].GetField() != tc.field || v[0].GetDescription() != tc.violation {
				t.Fatalf("violations %v", v)
			}
			if strings.Contains(fmt.Sprint(s.Proto()), "hunter2") {
				t.Fatalf("submitted text crossed")
			}
		})
	}
}

func TestToStatusUnsupportedError(t *testing.T) {
	err := fmt.Errorf("suspend: %w", &providercontract.UnsupportedError{Operation: "Suspend", Code: "checkpoint_unavailable"})
	s, info, _ := decode(t, ToStatus(err))
	if s.Code() != codes.Unimplemented || s.Message() != "unsupported operation" {
		t.Fatalf("got %v %q", s.Code(), s.Message())
	}
	md := info.GetMetadata()
	if md[MetadataOperation] != "Suspend" || md[MetadataReason] != "checkpoint_unavailable" {
		t.Fatalf("metadata %v", md)
	}

	// An UnsupportedError whose fields are not authored names carries none.
	bad := &providercontract.UnsupportedError{Operation: "Suspend hunter2", Code: "Not A Code"}
	_, info, _ = decode(t, ToStatus(bad))
	if len(info.GetMetadata()) != 0 {
		t.Fatalf("metadata %v", info.GetMetadata())
	}
}

func TestToStatusIsIdempotent(t *testing.T) {
	first := ToStatus(errdefs.Invalid("page_size", "must not be negative"))
	again := ToStatus(fmt.Errorf("list: %w", first))
	a, _ := status.FromError(first)
	b, _ := status.FromError(again)
	if a.Code() != b.Code() || a.Message() != b.Message() || len(a.Details()) != len(b.Details()) {
		t.Fatalf("second conversion changed the status: %v / %v", a.Proto(), b.Proto())
	}
	if b.Code() != codes.InvalidArgument {
		t.Fatalf("code %v", b.Code())
	}
}

func TestRefusalCrossesWithItsReasonAndMessage(t *testing.T) {
	err := fmt.Errorf("remove node: %w", errdefs.Refuse(errdefs.ErrFailedPrecondition, "node_enabled", "node is enabled: retire it first"))
	s, info, _ := decode(t, ToStatus(err))
	if s.Code() != codes.FailedPrecondition || s.Message() != "node is enabled: retire it first" || info.GetReason() != "node_enabled" {
		t.Fatalf("status %v %q %v", s.Code(), s.Message(), info)
	}
	// An unauthored reason or message never crosses: the class's do.
	for _, bad := range []*errdefs.Refusal{
		errdefs.Refuse(errdefs.ErrFailedPrecondition, "node_enabled", "Not\nauthored"),
		errdefs.Refuse(errdefs.ErrFailedPrecondition, "Node Enabled", "node is enabled"),
	} {
		s, info, _ := decode(t, ToStatus(bad))
		if s.Message() != "failed precondition" || info.GetReason() != string(ReasonFailedPrecondition) {
			t.Fatalf("an unauthored refusal crossed: %q %v", s.Message(), info)
		}
	}
}

// TestDecodeIsToStatusReversed: what the server sends, a client decodes
// through the same codec to the class, with the fixed reason and message
// the server sent; a status not in the admin API's form is not decoded.
func TestDecodeIsToStatusReversed(t *testing.T) {
	for _, c := range []struct {
		sent            error
		class           error
		reason, message string
	}{
		{errdefs.Refuse(errdefs.ErrFailedPrecondition, "node_enabled", "node is enabled: retire it first"), errdefs.ErrFailedPrecondition, "node_enabled", "node is enabled: retire it first"},
		{errdefs.Refuse(errdefs.ErrObservationUnavailable, "database_unavailable", "the database is unavailable: retry once it is back"), errdefs.ErrObservationUnavailable, "database_unavailable", "the database is unavailable: retry once it is back"},
		{errdefs.Invalid("ttl", "must be positive"), errdefs.ErrInvalid, "invalid", "invalid ttl: must be positive"},
		{errdefs.ErrNotFound, errdefs.ErrNotFound, "not_found", "not found"},
		{errors.New("native text"), ErrInternal, "internal", "internal error"},
		{unauthenticated("missing admin token"), ErrUnauthenticated, "unauthenticated", "missing admin token"},
		{unimplemented(), ErrUnimplemented, "unimplemented", "unknown method"},
	} {
		r, ok := Decode(status.Convert(ToStatus(c.sent)))
		if !ok || !errors.Is(r, c.class) || r.Reason != c.reason || r.Message != c.message {
			t.Errorf("%v: decoded %+v %v; want %v %q %q", c.sent, r, ok, c.class, c.reason, c.message)
		}
	}
	foreign, err := status.New(codes.FailedPrecondition, "nope").WithDetails(&errdetails.ErrorInfo{Reason: "x", Domain: "other.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*status.Status{
		status.New(codes.Unavailable, "connection refused"),
		status.New(codes.FailedPrecondition, "no details"),
		foreign,
	} {
		if r, ok := Decode(st); ok {
			t.Errorf("%v decoded as %+v", st, r)
		}
	}
}
