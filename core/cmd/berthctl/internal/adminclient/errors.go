package adminclient

import (
	"errors"
	"strings"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
)

// Decode converts the error of an admin API call, once: a status in the
// admin API's form becomes its errdefs class as an *errdefs.Refusal with
// the fixed reason and message Core sent (admin.Decode, the client side
// of the admin API's errgrpc codec). Anything else (the transport's
// status, an *Error of berthctl's own, a context error) is returned as
// it is. nil returns nil.
func Decode(err error) error {
	if _, ok := errdefs.AsRefusal(err); ok || err == nil {
		return err
	}
	st, ok := grpcStatus(err)
	if !ok {
		return err
	}
	if r, ok := admin.Decode(st); ok {
		return r
	}
	return err
}

// Describe is the one line berthctl prints for err (after "error: "):
//
//   - an admin API error (Decode): its fixed reason and message,
//     "node_enabled: node is enabled: retire it first";
//   - another gRPC status (the transport's, before Core answered): its
//     code in snake case and its message, "unavailable: connection error";
//   - an *Error: its reason and message;
//   - anything else: its text.
func Describe(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Error()
	}
	err = Decode(err)
	if r, ok := errdefs.AsRefusal(err); ok {
		return r.Reason + ": " + r.Message
	}
	if st, ok := grpcStatus(err); ok {
		return snake(st.Code().String()) + ": " + st.Message()
	}
	return err.Error()
}

// Reason is the fixed reason of an admin API error (Decode) or of an
// *Error, "" for anything else.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if r, ok := errdefs.AsRefusal(Decode(err)); ok {
		return r.Reason
	}
	return ""
}

// Unreachable reports whether err is the transport's failure to reach the
// admin API (no answer from Core): UNAVAILABLE, and not in the admin
// API's form.
func Unreachable(err error) bool {
	st, ok := grpcStatus(Decode(err))
	return ok && st.Code() == codes.Unavailable
}

// snake turns a gRPC code name ("DeadlineExceeded") into a reason
// ("deadline_exceeded").
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// grpcStatus is the gRPC status err is or wraps, with its own message
// (status.FromError would give a wrapped status the whole chain's text).
func grpcStatus(err error) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return nil, false
	}
	return se.GRPCStatus(), true
}
