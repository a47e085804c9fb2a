package sessionadmin_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
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
	sess   *sessions.Service
	pages  *admin.PageTokens
	st     *store.Owner
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
	errdefstest.Must(t, err)
	pk := make([]byte, admin.MinPageTokenKeyBytes)
	_, err = rand.Read(pk)
	errdefstest.Must(t, err)
	pages, err := admin.NewPageTokens(pk)
	errdefstest.Must(t, err)
	owned := storetest.Owner(t, st)
	node := storetest.EnabledNode(t, st)
	storetest.Present(t, owned, node, 1)
	sess := sessions.New(owned, key, uuid.New(), uuid.New)
	return fixture{sess: sess, pages: pages, st: owned, node: node, tenant: uuid.New(), ctx: ctx}
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
	errdefstest.Must(t, err)
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
	sessionServer, err := sessionadmin.NewSessionServer(f.sess, f.tenant, f.pages)
	errdefstest.Must(t, err)
	allocationServer, err := sessionadmin.NewAllocationServer(f.sess, f.pages)
	errdefstest.Must(t, err)
	cc, token := admintest.Serve(t, admin.Options{Sessions: sessionServer, Allocations: allocationServer})
	return client{
		SessionServiceClient:    adminv1.NewSessionServiceClient(cc),
		AllocationServiceClient: adminv1.NewAllocationServiceClient(cc),
		token:                   token,
	}
}

// authed returns ctx carrying the admin bearer token.
func (c client) authed(ctx context.Context) context.Context { return admintest.Authed(ctx, c.token) }
