package sessionadmin_test

import (
	"context"
	"crypto/rand"
	"testing"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/sessionadmin"
	"berth.dev/core/sessions/sessionstest"
)

// fixture is the Session fixture and the page tokens of the adapters.
type fixture struct {
	sessionstest.Fixture
	pages *admin.PageTokens
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	f := sessionstest.New(t)
	pk := make([]byte, admin.MinPageTokenKeyBytes)
	_, err := rand.Read(pk)
	errdefstest.Must(t, err)
	pages, err := admin.NewPageTokens(pk)
	errdefstest.Must(t, err)
	return fixture{Fixture: f, pages: pages}
}

// client is a real gRPC client of an admin server serving f's services
// on a loopback port.
type client struct {
	adminv1.SessionServiceClient
	adminv1.AllocationServiceClient
	token string
}

func (f fixture) serve(t *testing.T) client { return f.serveWith(t, nil) }

// serveWith is serve with keys authenticating project keys.
func (f fixture) serveWith(t *testing.T, keys admin.KeyAuthenticator) client {
	t.Helper()
	srv, err := sessionadmin.New(f.Svc, f.pages)
	errdefstest.Must(t, err)
	cc, token := admintest.Serve(t, admin.Options{Keys: keys, Services: []admin.Service{srv}})
	return client{
		SessionServiceClient:    adminv1.NewSessionServiceClient(cc),
		AllocationServiceClient: adminv1.NewAllocationServiceClient(cc),
		token:                   token,
	}
}

// authed returns ctx carrying the admin bearer token.
func (c client) authed(ctx context.Context) context.Context { return admintest.Authed(ctx, c.token) }
