package sessionadmin_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"berth.dev/sandbox"

	"berth.dev/core/admin"
	"berth.dev/core/secrets"
	"berth.dev/core/sessionadmin"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

const testTimeout = time.Minute

// fixture is the services on a fresh database with one enabled node as
// the only placement candidate and no deployment yet.
type fixture struct {
	svc    *sessionadmin.Service
	st     *store.Store
	node   uuid.UUID
	tenant uuid.UUID
	ctx    context.Context
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	t.Parallel()
	st := storetest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	key, _, err := secrets.NewKey()
	must(t, err)
	pk := make([]byte, admin.MinPageTokenKeyBytes)
	_, err = rand.Read(pk)
	must(t, err)
	pages, err := admin.NewPageTokens(pk)
	must(t, err)
	node := enabledNode(t, ctx, st)
	sess := sessions.New(st, key, uuid.New(), uuid.New, func() []uuid.UUID { return []uuid.UUID{node} })
	tenant := uuid.New()
	svc, err := sessionadmin.NewService(sess, st, tenant, pages)
	must(t, err)
	return fixture{svc: svc, st: st, node: node, tenant: tenant, ctx: ctx}
}

func enabledNode(t *testing.T, ctx context.Context, st *store.Store) uuid.UUID {
	t.Helper()
	der := make([]byte, 300)
	_, _ = rand.Read(der)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	fp := sha256.Sum256(der)
	n, err := st.CreateNode(ctx, uuid.New(), "node.test:7443", der, "sha256:"+hex.EncodeToString(fp[:]), key)
	must(t, err)
	_, err = st.SetNodeState(ctx, n.ID, store.NodeEnrolled, store.NodeEnabled)
	must(t, err)
	return n.ID
}

// deploy commits a deployment generation with maxActive per node.
func (f fixture) deploy(t *testing.T, maxActive int32) {
	t.Helper()
	cur, err := f.st.CurrentGeneration(f.ctx)
	var prev uint64
	if err == nil {
		prev = cur.Generation
	}
	_, err = f.st.CommitGeneration(f.ctx, prev, store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive: maxActive, MaxRetained: 1,
		},
	})
	must(t, err)
}

// client is a real gRPC client of an admin server serving f's services
// on a loopback port.
type client struct {
	adminv1.SessionServiceClient
	adminv1.AllocationServiceClient
	token string
}

func (f fixture) serve(t *testing.T) client {
	t.Helper()
	token, digest, err := admin.NewAdminToken()
	must(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	s := admin.NewServer(admin.Options{
		TokenDigest: digest,
		Sessions:    sessionadmin.NewSessionServer(f.svc),
		Allocations: sessionadmin.NewAllocationServer(f.svc),
	})
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
	return client{
		SessionServiceClient:    adminv1.NewSessionServiceClient(cc),
		AllocationServiceClient: adminv1.NewAllocationServiceClient(cc),
		token:                   token,
	}
}

func (c client) authed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantStatus fails the test unless err is the admin status of code and
// reason.
func wantStatus(t testing.TB, err error, code codes.Code, reason admin.Reason) *status.Status {
	t.Helper()
	s, ok := status.FromError(err)
	if !ok || s.Code() != code {
		t.Fatalf("error %v, want %v", err, code)
	}
	for _, d := range s.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == string(reason) && ei.GetDomain() == admin.ErrorDomain {
			return s
		}
	}
	t.Fatalf("error %v carries no ErrorInfo reason %q", err, reason)
	return nil
}

// wantInvalidField fails the test unless err is INVALID_ARGUMENT naming
// field.
func wantInvalidField(t testing.TB, err error, field string) {
	t.Helper()
	s := wantStatus(t, err, codes.InvalidArgument, admin.ReasonInvalid)
	for _, d := range s.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					return
				}
			}
		}
	}
	t.Fatalf("error %v does not name field %q", err, field)
}
