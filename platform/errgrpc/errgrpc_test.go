package errgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/platform/errgrpc"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// secret stands for native text or a credential that must never cross.
const secret = "docker: container 3f9a token=hunter2"

var (
	internal  = errgrpc.Row{Code: codes.Internal, Reason: "internal", Message: "internal error"}
	cancelled = errgrpc.Row{Class: context.Canceled, Code: codes.Canceled, Reason: "cancelled", Message: "request cancelled"}
)

func newCodec(o errgrpc.Options) *errgrpc.Codec {
	o.Unknown = internal
	return errgrpc.New("test.berth.dev", append(errgrpc.Common(), cancelled), o)
}

func info(t *testing.T, st *status.Status) (*errdetails.ErrorInfo, *errdetails.BadRequest) {
	t.Helper()
	var (
		ei *errdetails.ErrorInfo
		br *errdetails.BadRequest
	)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			ei = d
		case *errdetails.BadRequest:
			br = d
		default:
			t.Fatalf("unexpected detail %T", d)
		}
	}
	if ei == nil || ei.GetDomain() != "test.berth.dev" {
		t.Fatalf("no ErrorInfo of the domain: %v", st.Proto())
	}
	return ei, br
}

func TestEveryClassCrossesAsItsRowWithoutItsText(t *testing.T) {
	c := newCodec(errgrpc.Options{})
	for _, r := range append(errgrpc.Common(), cancelled) {
		err := fmt.Errorf("%s: %w", secret, r.Class)
		st, _ := status.FromError(c.ToStatus(err))
		ei, _ := info(t, st)
		if st.Code() != r.Code || st.Message() != r.Message || ei.GetReason() != r.Reason {
			t.Fatalf("%s: %v %q %q", r.Reason, st.Code(), st.Message(), ei.GetReason())
		}
		if strings.Contains(fmt.Sprint(st.Proto()), "hunter2") {
			t.Fatalf("%s: native text crossed", r.Reason)
		}
		d, ok := c.Decode(st)
		if !ok || d.Row.Reason != r.Reason || !errors.Is(r.Class, d.Row.Class) {
			t.Fatalf("%s: decoded %v %v", r.Reason, d.Row, ok)
		}
	}
	// No known class: the unknown row.
	st, _ := status.FromError(c.ToStatus(errors.New(secret)))
	if ei, _ := info(t, st); st.Code() != codes.Internal || ei.GetReason() != "internal" || st.Message() != "internal error" {
		t.Fatalf("unknown: %v", st.Proto())
	}
	if c.ToStatus(nil) != nil {
		t.Fatal("nil converted")
	}
}

func TestPrecedenceAndPassThrough(t *testing.T) {
	c := newCodec(errgrpc.Options{})
	// An error of several classes crosses as the first: an unknown outcome
	// wins over not found.
	both := fmt.Errorf("%w: %w", errdefs.ErrNotFound, errdefs.ErrComputeUnconfirmed)
	if st, _ := status.FromError(c.ToStatus(both)); st.Code() != codes.Unknown {
		t.Fatalf("precedence: %v", st.Code())
	}
	first := c.ToStatus(errdefs.Invalid("ttl", "must be positive"))
	if again := c.ToStatus(fmt.Errorf("wrapped: %w", first)); again != first { //nolint:errorlint // identity: the converted value itself passes through
		t.Fatalf("a converted error was converted again")
	}
	if !c.Owns(first) || newCodecDomain("other.berth.dev").Owns(first) {
		t.Fatal("Owns")
	}
}

func newCodecDomain(d string) *errgrpc.Codec {
	return errgrpc.New(d, errgrpc.Common(), errgrpc.Options{Unknown: internal})
}

func TestFieldErrors(t *testing.T) {
	err := fmt.Errorf("create: %w", errdefs.Invalid("turn.command.argv[2]", "must not be empty"))
	plain := newCodec(errgrpc.Options{})
	st := plain.Encode(err, internal)
	ei, br := info(t, st)
	if ei.GetMetadata()[errgrpc.MetadataField] != "turn.command.argv[2]" || br != nil || st.Message() != "invalid argument" {
		t.Fatalf("plain field error: %v", st.Proto())
	}
	if d, ok := plain.Decode(st); !ok || d.Field != "turn.command.argv[2]" {
		t.Fatalf("decode field: %v %v", d, ok)
	}
	detailed := newCodec(errgrpc.Options{FieldDetails: true})
	st = detailed.Encode(err, internal)
	_, br = info(t, st)
	if st.Message() != "invalid turn.command.argv[2]: must not be empty" || br == nil ||
		br.GetFieldViolations()[0].GetField() != "turn.command.argv[2]" {
		t.Fatalf("detailed field error: %v", st.Proto())
	}
	// A field or reason of unsafe form never crosses.
	st = detailed.Encode(errdefs.Invalid("/home/alice/.ssh/id_rsa", secret), internal)
	if ei, br := info(t, st); len(ei.GetMetadata()) != 0 || br != nil || st.Message() != "invalid argument" {
		t.Fatalf("unsafe field crossed: %v", st.Proto())
	}
	st = detailed.Encode(errdefs.Invalid("ttl", "Token=hunter2\n"), internal)
	if strings.Contains(st.Message(), "hunter2") || st.Message() != "invalid ttl: invalid" {
		t.Fatalf("unsafe reason crossed: %q", st.Message())
	}
}

func TestRefusalsCrossOnlyWhereAllowed(t *testing.T) {
	r := errdefs.Refuse(errdefs.ErrFailedPrecondition, "node_enabled", "node is enabled: retire it first")
	rows := append(errgrpc.Common(), errgrpc.Row{Class: errdefs.ErrFailedPrecondition, Code: codes.FailedPrecondition, Reason: "failed_precondition", Message: "failed precondition"})
	allow := errgrpc.New("test.berth.dev", rows, errgrpc.Options{Unknown: internal, Refusals: true})
	st := allow.Encode(fmt.Errorf("remove node: %w", r), internal)
	if ei, _ := info(t, st); ei.GetReason() != "node_enabled" || st.Message() != "node is enabled: retire it first" || st.Code() != codes.FailedPrecondition {
		t.Fatalf("refusal: %v", st.Proto())
	}
	deny := errgrpc.New("test.berth.dev", rows, errgrpc.Options{Unknown: internal})
	st = deny.Encode(r, internal)
	if ei, _ := info(t, st); ei.GetReason() != "failed_precondition" || st.Message() != "failed precondition" {
		t.Fatalf("refusal crossed where not allowed: %v", st.Proto())
	}
}

func TestUnsupported(t *testing.T) {
	ue := &providercontract.UnsupportedError{Operation: "Suspend", Code: "no_native_checkpoint"}
	c := newCodec(errgrpc.Options{})
	st := c.Encode(fmt.Errorf("x: %w", ue), internal)
	ei, _ := info(t, st)
	if st.Code() != codes.Unimplemented || ei.GetMetadata()[errgrpc.MetadataOperation] != "Suspend" || ei.GetMetadata()[errgrpc.MetadataReason] != "no_native_checkpoint" {
		t.Fatalf("unsupported: %v", st.Proto())
	}
	if d, ok := c.Decode(st); !ok || d.Operation != "Suspend" || d.UnsupportedReason != "no_native_checkpoint" {
		t.Fatalf("decode: %v %v", d, ok)
	}
	// A bare ErrUnsupported: without metadata, or the unknown row when
	// strict.
	if ei, _ := info(t, c.Encode(errdefs.ErrUnsupported, internal)); len(ei.GetMetadata()) != 0 {
		t.Fatal("bare unsupported got metadata")
	}
	strict := newCodec(errgrpc.Options{StrictUnsupported: true, Operation: func(op providercontract.Operation) bool { return op == "Resume" }})
	for _, err := range []error{errdefs.ErrUnsupported, ue} {
		if st := strict.Encode(err, internal); st.Code() != codes.Internal {
			t.Fatalf("strict: %v", st.Proto())
		}
	}
}

func TestDecodeRefusesOtherForms(t *testing.T) {
	c := newCodec(errgrpc.Options{})
	other := newCodecDomain("other.berth.dev")
	good := c.Encode(errdefs.ErrNotFound, internal)
	cases := map[string]*status.Status{
		"no details":     status.New(codes.NotFound, "not found"),
		"other domain":   other.Encode(errdefs.ErrNotFound, internal),
		"wrong code":     c.Build(errgrpc.Row{Code: codes.Internal, Reason: "not_found", Message: "not found"}, nil),
		"unknown reason": c.Build(errgrpc.Row{Code: codes.NotFound, Reason: "gone", Message: "gone"}, nil),
		"stray metadata": c.Build(errgrpc.Row{Code: codes.NotFound, Reason: "not_found", Message: "not found"}, map[string]string{"id": "x"}),
		"unsafe field":   c.Build(errgrpc.Row{Code: codes.InvalidArgument, Reason: "invalid", Message: "invalid argument"}, map[string]string{"field": "/etc"}),
		"two error infos": func() *status.Status {
			s, _ := good.WithDetails(&errdetails.ErrorInfo{Reason: "not_found", Domain: "test.berth.dev"})
			return s
		}(),
	}
	for name, st := range cases {
		if _, ok := c.Decode(st); ok {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, ok := c.Decode(good); !ok {
		t.Fatal("own form not decoded")
	}
}

func TestNewRefusesABrokenTable(t *testing.T) {
	for name, rows := range map[string][]errgrpc.Row{
		"duplicate reason": append(errgrpc.Common(), errgrpc.Row{Class: errdefs.ErrContract, Code: codes.Internal, Reason: "invalid", Message: "x"}),
		"no class":         {{Code: codes.Internal, Reason: "x", Message: "x"}},
		"unsafe reason":    {{Class: errdefs.ErrContract, Code: codes.Internal, Reason: "Bad Reason", Message: "x"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			errgrpc.New("test.berth.dev", rows, errgrpc.Options{Unknown: internal})
		}()
	}
}
