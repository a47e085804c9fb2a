package nodeadmin_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/nodetls"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
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
	admintest.Must(t, err)
	key := make([]byte, admin.MinPageTokenKeyBytes)
	_, err = rand.Read(key)
	admintest.Must(t, err)
	pages, err := admin.NewPageTokens(key)
	admintest.Must(t, err)
	svc, err := nodeadmin.NewService(st, ca.Fingerprint(), pages, time.Now)
	admintest.Must(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return fixture{svc: svc, st: st, ca: ca, enroll: enrollment.NewService(st, ca, time.Now, uuid.New), ctx: ctx}
}

// enrollNode enrolls a node with a new token, as berth-nodeagent enroll
// would, and returns its id and the token's id.
func (f fixture) enrollNode(t *testing.T) (uuid.UUID, string) {
	t.Helper()
	issued, err := f.svc.CreateEnrollmentToken(f.ctx, uuid.NewString(), time.Hour)
	admintest.Must(t, err)
	res, err := f.enroll.Enroll(f.ctx, issued.Text.Reveal(), newCSR(t), "node.test:7443")
	admintest.Must(t, err)
	return res.NodeID, issued.Token.ID
}

func newCSR(t *testing.T) []byte {
	t.Helper()
	key, err := nodetls.NewNodeKey()
	admintest.Must(t, err)
	der, err := nodetls.NewCSR(key, uuid.NewString())
	admintest.Must(t, err)
	return der
}

// storedSecretHash reads the secret hash the database holds for token id.
func (f fixture) storedSecretHash(t *testing.T, id string) []byte {
	t.Helper()
	var h []byte
	admintest.Must(t, f.st.Pool().QueryRow(f.ctx, "SELECT secret_hash FROM enrollment_tokens WHERE id = $1", id).Scan(&h))
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
	cc, token := admintest.Serve(t, admin.Options{Nodes: nodeadmin.NewServer(f.svc, nil)})
	return client{NodeServiceClient: adminv1.NewNodeServiceClient(cc), token: token}
}

// authed returns ctx carrying the admin bearer token.
func (c client) authed(ctx context.Context) context.Context { return admintest.Authed(ctx, c.token) }
