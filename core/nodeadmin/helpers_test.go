package nodeadmin_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodetls"

	"berth.dev/core/admin"
	"berth.dev/core/enrollment"
	"berth.dev/core/nodeadmin"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// testTimeout bounds each test's calls.
const testTimeout = time.Minute

// fixture is a NodeService on a fresh database, with the enrollment
// service that consumes its tokens.
type fixture struct {
	svc    *nodeadmin.Service
	st     *store.Store
	ca     *nodetls.CA
	enroll *enrollment.Service
	ctx    context.Context
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	t.Parallel()
	st := storetest.New(t)
	ca, err := nodetls.NewCA(uuid.NewString(), time.Now())
	must(t, err)
	key := make([]byte, admin.MinPageTokenKeyBytes)
	_, err = rand.Read(key)
	must(t, err)
	pages, err := admin.NewPageTokens(key)
	must(t, err)
	svc, err := nodeadmin.NewService(st, ca.Fingerprint(), pages, time.Now)
	must(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return fixture{svc: svc, st: st, ca: ca, enroll: enrollment.NewService(st, ca, time.Now, uuid.New), ctx: ctx}
}

// enrollNode enrolls a node with a new token, as berth-nodeagent enroll
// would, and returns its id and the token's id.
func (f fixture) enrollNode(t *testing.T) (uuid.UUID, string) {
	t.Helper()
	issued, err := f.svc.CreateEnrollmentToken(f.ctx, uuid.NewString(), time.Hour)
	must(t, err)
	res, err := f.enroll.Enroll(f.ctx, string(issued.Text), newCSR(t), "node.test:7443")
	must(t, err)
	return res.NodeID, issued.Token.ID
}

func newCSR(t *testing.T) []byte {
	t.Helper()
	key, err := nodetls.NewNodeKey()
	must(t, err)
	der, err := nodetls.NewCSR(key, uuid.NewString())
	must(t, err)
	return der
}

// storedSecretHash reads the secret hash the database holds for token id.
func (f fixture) storedSecretHash(t *testing.T, id string) []byte {
	t.Helper()
	var h []byte
	must(t, f.st.Pool().QueryRow(f.ctx, "SELECT secret_hash FROM enrollment_tokens WHERE id = $1", id).Scan(&h))
	return h
}

// client is a real gRPC client of an admin server that serves f's
// NodeService on a loopback port.
type client struct {
	adminv1.NodeServiceClient
	token string
}

func (f fixture) serve(t *testing.T) client {
	t.Helper()
	token, digest, err := admin.NewAdminToken()
	must(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	s := admin.NewServer(admin.Options{TokenDigest: digest, Nodes: nodeadmin.NewServer(f.svc, nil)})
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return client{NodeServiceClient: adminv1.NewNodeServiceClient(cc), token: token}
}

// authed returns ctx carrying the admin bearer token.
func (c client) authed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantClass fails the test unless err is of class class.
func wantClass(t testing.TB, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error %v, want class %v", err, class)
	}
}

// wantField fails the test unless err is errdefs.ErrInvalid naming field.
func wantField(t testing.TB, err error, field string) {
	t.Helper()
	got, ok := errdefs.Field(err)
	if !errdefs.IsInvalid(err) || !ok || got != field {
		t.Fatalf("error %v, want invalid %s", err, field)
	}
}

// wantStatus fails the test unless err is a status with code and
// ErrorInfo reason.
func wantStatus(t testing.TB, err error, code codes.Code, reason admin.Reason) *status.Status {
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

// wantInvalidField fails the test unless err is INVALID_ARGUMENT with a
// field violation of field.
func wantInvalidField(t testing.TB, err error, field string) {
	t.Helper()
	s := wantStatus(t, err, codes.InvalidArgument, admin.ReasonInvalid)
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
