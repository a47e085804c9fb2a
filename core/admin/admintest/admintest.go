package admintest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"berth.dev/core/admin"
	"berth.dev/platform/errgrpc/errgrpctest"
	"berth.dev/sandbox/errdefs/errdefstest"
)

// Serve starts a real admin server for opts (with a fresh admin token) on
// 127.0.0.1, stops it at the end of the test, and returns a client
// connection and the token.
func Serve(t testing.TB, opts admin.Options) (*grpc.ClientConn, string) {
	t.Helper()
	token, digest, err := admin.NewAdminToken()
	errdefstest.Must(t, err)
	opts.TokenDigest = digest
	return errgrpctest.Serve(t, admin.NewServer(opts)), token
}

// Authed returns ctx carrying token as the admin bearer token.
func Authed(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// WantStatus fails the test unless err is a status with code and the
// ErrorInfo reason of the admin API's domain.
func WantStatus(t testing.TB, err error, code codes.Code, reason admin.Reason) *status.Status {
	t.Helper()
	s, ok := status.FromError(err)
	if !ok || s.Code() != code {
		t.Fatalf("error %v, want %v", err, code)
	}
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != string(reason) || info.GetDomain() != admin.ErrorDomain {
				t.Fatalf("ErrorInfo %v, want reason %s", info, reason)
			}
			return s
		}
	}
	t.Fatalf("status %v has no ErrorInfo", s.Code())
	return nil
}

// WantInvalidField fails the test unless err is INVALID_ARGUMENT with a
// field violation of field.
func WantInvalidField(t testing.TB, err error, field string) {
	t.Helper()
	s := WantStatus(t, err, codes.InvalidArgument, admin.ReasonInvalid)
	for _, d := range s.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			if v := br.GetFieldViolations(); len(v) == 1 && v[0].GetField() == field {
				return
			}
			t.Fatalf("BadRequest %v, want field %s", br, field)
		}
	}
	t.Fatalf("status %q has no BadRequest", s.Message())
}

// Named is an admin API resource message.
type Named interface{ GetName() string }

// Pages walks a listing page by page until its next page token is empty:
// page lists the page of token and returns its resources and the next
// token. It returns every resource's name in order and the number of
// pages; a failed call fails the test.
func Pages[T Named](t testing.TB, page func(token string) ([]T, string, error)) (names []string, pages int) {
	t.Helper()
	token := ""
	for {
		items, next, err := page(token)
		errdefstest.Must(t, err)
		pages++
		for _, it := range items {
			names = append(names, it.GetName())
		}
		if token = next; token == "" {
			return names, pages
		}
	}
}

// WantListed checks a listing with a show flag (show_removed,
// show_deleted, ...) over every page: shown, it lists all; not shown, it
// lists visible, each in order. page lists the page of token with the
// flag; hidden names what the flag hides, for the failure.
func WantListed[T Named](t testing.TB, page func(show bool, token string) ([]T, string, error),
	all, visible []string, hidden string,
) {
	t.Helper()
	for _, show := range []bool{true, false} {
		got, _ := Pages(t, func(token string) ([]T, string, error) { return page(show, token) })
		want, without := all, ""
		if !show {
			want, without = visible, " without "+hidden
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed %v%s\nwant %v", got, without, want)
		}
	}
}

// WantUnauthenticated makes calls without the admin token: with none, with
// a wrong one, and with token itself in a Basic header. calls makes every
// call of the test with the context it gets and returns their errors; each
// must be refused as unauthenticated, and no refusal may carry token.
func WantUnauthenticated(t testing.TB, ctx context.Context, token string, calls func(context.Context) []error) {
	t.Helper()
	for name, ctx := range map[string]context.Context{
		"no token":    ctx,
		"wrong token": metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+admin.TokenPrefix+"AAAA"),
		"not bearer":  metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+token),
	} {
		for _, err := range calls(ctx) {
			WantStatus(t, err, codes.Unauthenticated, admin.ReasonUnauthenticated)
			if strings.Contains(err.Error(), token) {
				t.Fatalf("%s: the refusal carries the admin token", name)
			}
		}
	}
}

// Field returns the field an admin API error names in its ErrorInfo ("" when
// it names none or is not of the admin domain).
func Field(err error) string {
	s, _ := status.FromError(err)
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == admin.ErrorDomain {
			return info.GetMetadata()[admin.MetadataField]
		}
	}
	return ""
}
