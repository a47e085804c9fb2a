package adminclient

import (
	"errors"
	"strings"
	"unicode"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// Describe is the one line berthctl prints for err (after "error: "):
//
//   - an admin API status: its ErrorInfo's fixed reason and its message,
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
	st, ok := grpcStatus(err)
	if !ok {
		return err.Error()
	}
	if reason := Reason(err); reason != "" {
		return reason + ": " + st.Message()
	}
	return snake(st.Code().String()) + ": " + st.Message()
}

// Reason is the fixed reason of an admin API error: its ErrorInfo's when
// the status carries one of the admin domain, an *Error's, or "".
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	st, ok := grpcStatus(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == adminv1.ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}

// Unreachable reports whether err is the transport's failure to reach the
// admin API (no answer from Core).
func Unreachable(err error) bool {
	st, ok := grpcStatus(err)
	return ok && st.Code() == codes.Unavailable && Reason(err) == ""
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
