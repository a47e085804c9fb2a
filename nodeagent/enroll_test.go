package nodeagent_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"berth.dev/platform/nodetls"
	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/nodeagent"
)

// refusingCore is an EnrollmentService that answers every enrollment with
// err.
type refusingCore struct {
	enrollmentv1.UnimplementedEnrollmentServiceServer
	err error
}

func (c refusingCore) Enroll(context.Context, *enrollmentv1.EnrollRequest) (*enrollmentv1.EnrollResponse, error) {
	return nil, c.err
}

// newCA is an installation CA.
func newCA(t *testing.T) *nodetls.CA {
	t.Helper()
	ca, err := nodetls.NewCA(uuid.NewString(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// serveEnrollment serves answer on loopback over TLS with a Core server
// certificate of ca, as Core's public listener does.
func serveEnrollment(t *testing.T, ca *nodetls.CA, answer error) string {
	t.Helper()
	id, err := nodetls.CAInstallationID(ca.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueCoreServer(id, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nodetls.EnrollmentServerConfig(cert, ca.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	enrollmentv1.RegisterEnrollmentServiceServer(srv, refusingCore{err: answer})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// enroll runs one enrollment of a fresh node against addr with a token
// pinning ca.
func enroll(t *testing.T, ca *nodetls.CA, addr string) error {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	state, err := nodeagent.OpenStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = state.Close() })
	token, _, _, _, err := nodetls.NewToken(nodetls.Fingerprint(ca.Certificate()), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = nodeagent.Enroll(ctx, state, addr, token, "127.0.0.1:7443")
	return err
}

// codecStatus is a status in enrollment's codec form: one ErrorInfo of
// its domain with reason.
func codecStatus(t *testing.T, code codes.Code, reason, msg string, md map[string]string) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Domain: enrollmentv1.ErrorDomain, Reason: reason, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// TestEnrollDecodesCoreAnswersThroughTheCodec: Core's answer is decoded
// through enrollment's codec (errgrpc) into its errdefs class, never by
// its code alone or its text: a status not in the codec's form is no
// answer from Core (retry with the same token), whatever its code or
// message says; a Core whose certificate does not chain to the pinned CA
// is fenced because the pin check refused it, not because of a message.
func TestEnrollDecodesCoreAnswersThroughTheCodec(t *testing.T) {
	ca := newCA(t)
	for _, tc := range []struct {
		name   string
		answer error
		class  error
		says   string
	}{
		{"token rejected", codecStatus(t, codes.PermissionDenied, enrollmentv1.ReasonTokenRejected, "enrollment token rejected: create a new enrollment token and enroll again", nil),
			errdefs.ErrFenced, "rejected the token"},
		{"invalid request", codecStatus(t, codes.InvalidArgument, "invalid", "invalid request: not a well-formed protobuf message", map[string]string{"field": "request"}),
			errdefs.ErrInvalid, "rejected the request"},
		{"fenced", codecStatus(t, codes.FailedPrecondition, "fenced", "fenced", nil), errdefs.ErrFenced, "rejected the token"},
		{"internal", codecStatus(t, codes.Internal, "internal", "enrollment failed", nil), errdefs.ErrObservationUnavailable, "retry with the same token"},
		{"permission denied without the codec's form", status.Error(codes.PermissionDenied, "denied by a proxy"),
			errdefs.ErrObservationUnavailable, "retry with the same token"},
		{"handshake text without a handshake failure", status.Error(codes.Unavailable, "connection error: transport: authentication handshake failed"),
			errdefs.ErrObservationUnavailable, "retry with the same token"},
		{"another domain's refusal", status.Error(codes.InvalidArgument, "invalid"), errdefs.ErrObservationUnavailable, "retry with the same token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := enroll(t, ca, serveEnrollment(t, ca, tc.answer))
			if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v; want %v saying %q", err, tc.class, tc.says)
			}
		})
	}

	t.Run("forged Core", func(t *testing.T) {
		forged := newCA(t)
		err := enroll(t, ca, serveEnrollment(t, forged, nil))
		if !errors.Is(err, errdefs.ErrFenced) || !strings.Contains(err.Error(), "does not chain to the CA the token pins") {
			t.Fatalf("got %v; want fenced: Core's certificate does not chain to the pinned CA", err)
		}
	})
}
