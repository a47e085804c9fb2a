package nodeadmin_test

import (
	"context"
	"crypto/rand"
	"testing"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/enrollment/enrollmenttest"
	"berth.dev/core/nodeadmin"
	"berth.dev/core/store"
)

// allTokens lists every stored token, used, revoked and expired ones too.
func allTokens(t *testing.T, f enrollmenttest.Fixture) []store.EnrollmentToken {
	t.Helper()
	page, err := f.Tokens.List(f.Ctx, store.TokenCursor{}, store.MaxPageSize, true)
	errdefstest.Must(t, err)
	return page
}

// client is a real gRPC client of an admin server that serves f's
// NodeService on a loopback port.
type client struct {
	adminv1.NodeServiceClient
	token string
}

func serve(t *testing.T, f enrollmenttest.Fixture) client {
	t.Helper()
	key := make([]byte, admin.MinPageTokenKeyBytes)
	_, err := rand.Read(key)
	errdefstest.Must(t, err)
	pages, err := admin.NewPageTokens(key)
	errdefstest.Must(t, err)
	srv, err := nodeadmin.New(f.Tokens, f.Registry, pages, nil)
	errdefstest.Must(t, err)
	cc, token := admintest.Serve(t, admin.Options{Services: []admin.Service{srv}})
	return client{NodeServiceClient: adminv1.NewNodeServiceClient(cc), token: token}
}

// authed returns ctx carrying the admin bearer token.
func (c client) authed(ctx context.Context) context.Context { return admintest.Authed(ctx, c.token) }
