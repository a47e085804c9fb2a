package sessionstest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/events"
	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/suspension"
)

// Fixture is a Service over the owner-bound store of a fresh database.
type Fixture struct {
	Svc          *sessions.Service
	St           *storetest.Owned
	Key          secrets.Key
	Installation uuid.UUID
	Node         uuid.UUID
	// Tenant and Project are where the Fixture's Sessions go: the default
	// tenant and project (migration 0022).
	Tenant  uuid.UUID
	Project uuid.UUID
	// Bus is what the Service (and its suspension Service) publish on.
	Bus *events.Bus
	Ctx context.Context
}

// New returns a Fixture for a parallel test.
func New(t *testing.T) Fixture {
	t.Helper()
	st, ctx := storetest.Parallel(t)
	key, _, err := secrets.NewKey()
	errdefstest.Must(t, err)
	owned := storetest.Owner(t, st)
	node := storetest.EnabledNode(t, owned)
	storetest.Present(t, owned, node, 1)
	installation := uuid.New()
	bus := events.New()
	return Fixture{
		Svc: sessions.New(owned, key, installation, uuid.New, suspension.New(owned.Owner, bus), bus), Bus: bus, St: owned, Key: key,
		Installation: installation, Node: node, Tenant: store.DefaultTenantID, Project: store.DefaultProjectID, Ctx: ctx,
	}
}

// Deploy commits the next deployment generation with maxActive per node.
func (f Fixture) Deploy(t *testing.T, maxActive int32) {
	t.Helper()
	_, err := f.St.CommitGeneration(f.Ctx, storetest.Seen(t, f.St), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive: maxActive, MaxRetained: 1,
		},
	})
	errdefstest.Must(t, err)
}
