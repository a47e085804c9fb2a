package sessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// fixture is a Service on a fresh database with one enabled, present
// node as the only placement candidate and no deployment yet.
type fixture struct {
	svc          *sessions.Service
	st           *store.Owner
	key          secrets.Key
	installation uuid.UUID
	node         uuid.UUID
	tenant       uuid.UUID
	ctx          context.Context
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	t.Parallel()
	st := storetest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	key, _, err := secrets.NewKey()
	must(t, err)
	owned := storetest.Owner(t, st)
	node := storetest.EnabledNode(t, st)
	storetest.Present(t, owned, node, 1)
	installation := uuid.New()
	return fixture{
		svc: sessions.New(owned, key, installation, uuid.New), st: owned, key: key,
		installation: installation, node: node, tenant: uuid.New(), ctx: ctx,
	}
}

// deploy commits generation 1 with maxActive per node.
func (f fixture) deploy(t *testing.T, maxActive int32) {
	t.Helper()
	_, err := f.st.CommitGeneration(f.ctx, 0, store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive: maxActive, MaxRetained: 1,
		},
	})
	must(t, err)
}

func (f fixture) create(t *testing.T) store.SessionBundle {
	t.Helper()
	b, err := f.svc.Create(f.ctx, sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.tenant})
	must(t, err)
	return b
}

// release confirms the cleanup of allocation id and releases it.
func (f fixture) release(t *testing.T, id uuid.UUID) {
	t.Helper()
	a, err := f.st.GetAllocation(f.ctx, id)
	must(t, err)
	a, err = f.st.RecordCleanup(f.ctx, a.ID, a.Revision, true)
	must(t, err)
	_, err = f.st.Release(f.ctx, a.ID)
	must(t, err)
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	got, ok := errdefs.Field(err)
	if !errdefs.IsInvalid(err) || !ok || got != field {
		t.Fatalf("error %v, want invalid %s", err, field)
	}
}

func TestCreateValidatesBeforeAnyRead(t *testing.T) {
	f := newFixture(t)
	// Without a deployment an invalid request is still invalid: nothing
	// is read before the request is checked.
	_, err := f.svc.Create(f.ctx, sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.tenant, DisplayName: "a\nb"})
	wantField(t, err, "display_name")
	_, err = f.svc.Create(f.ctx, sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.tenant})
	if !errors.Is(err, sessions.ErrNoDeployment) || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Create without a deployment: %v", err)
	}

	f.deploy(t, 10)
	for name, c := range map[string]struct {
		req   sessions.CreateRequest
		field string
	}{
		"no request id":     {sessions.CreateRequest{TenantID: f.tenant}, "request_id"},
		"too long":          {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.tenant, DisplayName: strings.Repeat("x", sessions.MaxDisplayNameLen+1)}, "display_name"},
		"too many runes":    {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.tenant, DisplayName: strings.Repeat("é", sessions.MaxDisplayNameLen+1)}, "display_name"},
		"control character": {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.tenant, DisplayName: "tab\there"}, "display_name"},
		"invalid UTF-8":     {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.tenant, DisplayName: "\xff"}, "display_name"},
	} {
		_, err := f.svc.Create(f.ctx, c.req)
		t.Run(name, func(t *testing.T) { wantField(t, err, c.field) })
	}
	page, err := f.svc.List(f.ctx, store.AgeCursor{}, 10, true)
	must(t, err)
	if len(page) != 0 {
		t.Fatalf("invalid requests created %d sessions", len(page))
	}

	// The bound is in characters, not bytes.
	req := sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.tenant, DisplayName: strings.Repeat("é", sessions.MaxDisplayNameLen)}
	b, err := f.svc.Create(f.ctx, req)
	must(t, err)
	if b.Session.DisplayName != req.DisplayName || b.Session.TenantID != f.tenant {
		t.Fatalf("created %+v", b.Session)
	}
	// A retry with another display name is not the same request.
	req.DisplayName = "other"
	_, err = f.svc.Create(f.ctx, req)
	if !errdefs.IsExists(err) {
		t.Fatalf("retry with another display name: %v", err)
	}
}

func TestReadsListInCreationOrder(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, 10)
	const total = 5
	var ids, allocs []uuid.UUID
	for range total {
		b := f.create(t)
		ids = append(ids, b.Session.ID)
		allocs = append(allocs, b.Allocation.ID)
	}
	for i, id := range ids {
		b, err := f.svc.Get(f.ctx, id)
		must(t, err)
		if b.Session.ID != id || b.Allocation.ID != allocs[i] || b.Placement.NodeID != f.node {
			t.Fatalf("get %d: %+v", i, b)
		}
		a, err := f.svc.GetAllocation(f.ctx, allocs[i])
		must(t, err)
		if a.ID != allocs[i] || a.SessionID != id || a.NodeID != f.node {
			t.Fatalf("get allocation %d: %+v", i, a)
		}
	}

	// The first Session deleted, its allocation released.
	_, err := f.svc.Delete(f.ctx, ids[0])
	must(t, err)
	f.release(t, allocs[0])

	listSessions := func(includeDeleted bool) []uuid.UUID {
		var got []uuid.UUID
		var after store.AgeCursor
		for {
			page, err := f.svc.List(f.ctx, after, 2, includeDeleted)
			must(t, err)
			for _, b := range page {
				got = append(got, b.Session.ID)
			}
			if len(page) < 2 {
				return got
			}
			after = sessions.Cursor(page[len(page)-1])
		}
	}
	if got := listSessions(true); !equalIDs(got, ids) {
		t.Fatalf("listed %v\nwant %v", got, ids)
	}
	if got := listSessions(false); !equalIDs(got, ids[1:]) {
		t.Fatalf("listed %v without deleted\nwant %v", got, ids[1:])
	}
	listAllocs := func(includeReleased bool) []uuid.UUID {
		var got []uuid.UUID
		var after store.AgeCursor
		for {
			page, err := f.svc.ListAllocations(f.ctx, after, 2, includeReleased)
			must(t, err)
			for _, a := range page {
				got = append(got, a.ID)
			}
			if len(page) < 2 {
				return got
			}
			after = sessions.AllocationCursor(page[len(page)-1])
		}
	}
	if got := listAllocs(true); !equalIDs(got, allocs) {
		t.Fatalf("listed %v\nwant %v", got, allocs)
	}
	if got := listAllocs(false); !equalIDs(got, allocs[1:]) {
		t.Fatalf("listed %v without released\nwant %v", got, allocs[1:])
	}

	// Unknown ids are not found.
	if _, err := f.svc.Get(f.ctx, uuid.New()); !errdefs.IsNotFound(err) {
		t.Fatalf("get unknown session: %v", err)
	}
	if _, err := f.svc.Delete(f.ctx, uuid.New()); !errdefs.IsNotFound(err) {
		t.Fatalf("delete unknown session: %v", err)
	}
	if _, err := f.svc.GetAllocation(f.ctx, uuid.New()); !errdefs.IsNotFound(err) {
		t.Fatalf("get unknown allocation: %v", err)
	}
}

func equalIDs(a, b []uuid.UUID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStateFollowsRecordedEvidence walks one Session through its life
// and checks what the logic derives from each recorded fact.
func TestStateFollowsRecordedEvidence(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, 10)
	b := f.create(t)
	read := func() (store.SessionBundle, sessions.Environment) {
		t.Helper()
		b, err := f.svc.Get(f.ctx, b.Session.ID)
		must(t, err)
		r, err := f.svc.Readiness(f.ctx, b)
		must(t, err)
		return b, sessions.EnvironmentOf(b, r[b.Allocation.ID])
	}
	allocState := func(id uuid.UUID) (sessions.AllocationState, bool) {
		t.Helper()
		a, err := f.svc.GetAllocation(f.ctx, id)
		must(t, err)
		return sessions.AllocationStateOf(a.Allocation), sessions.CreateSettled(a.Allocation)
	}

	got, env := read()
	if s := sessions.StateOf(got); s != sessions.StateProvisioning || env != (sessions.Environment{}) {
		t.Fatalf("new session: %v %+v", s, env)
	}
	if s, settled := allocState(b.Allocation.ID); s != sessions.AllocationPending || settled {
		t.Fatalf("new allocation: %v settled %t", s, settled)
	}

	a, err := f.st.ClaimCreate(f.ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	if s, settled := allocState(a.ID); s != sessions.AllocationCreating || settled {
		t.Fatalf("dispatched allocation: %v settled %t", s, settled)
	}
	_, err = f.st.RecordCreateOutcome(f.ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-1", BootstrapComplete: true})
	must(t, err)
	got, env = read()
	if s := sessions.StateOf(got); s != sessions.StateActive || env != (sessions.Environment{ComputeAvailable: true}) {
		t.Fatalf("running session: %v %+v", s, env)
	}
	if s, settled := allocState(a.ID); s != sessions.AllocationActive || !settled {
		t.Fatalf("running allocation: %v settled %t", s, settled)
	}

	// The Runtime connects, then reports its preparation.
	sealed, err := f.st.GetAllocationCredential(f.ctx, a.ID)
	must(t, err)
	cred, err := f.key.Open(sealed.Nonce, sealed.Ciphertext, secrets.DeviceCredential(f.installation, a.ID))
	must(t, err)
	g, err := f.st.AcceptRuntime(f.ctx, store.AcceptRuntimeParams{
		ConnectionID: uuid.New(), DeviceID: b.Allocation.DeviceID, Credential: runtimebootstrap.NewSecret(string(cred)),
	})
	must(t, err)
	_, env = read()
	if env != (sessions.Environment{ComputeAvailable: true, RuntimeConnected: true}) {
		t.Fatalf("connected: %+v", env)
	}
	_, err = f.st.MarkRuntimePrepared(f.ctx, g.Connection.ID)
	must(t, err)
	_, env = read()
	if env != (sessions.Environment{ComputeAvailable: true, RuntimeConnected: true, CapabilitiesPrepared: true, ExecutionAdmitted: true}) {
		t.Fatalf("prepared: %+v", env)
	}

	// Deletion: no longer admitted; deleting while the allocation is
	// owned, deleted once it is released.
	del, err := f.svc.Delete(f.ctx, b.Session.ID)
	must(t, err)
	r, err := f.svc.Readiness(f.ctx, del)
	must(t, err)
	if s, env := sessions.StateOf(del), sessions.EnvironmentOf(del, r[del.Allocation.ID]); s != sessions.StateDeleting || env.ExecutionAdmitted || env.ComputeAvailable {
		t.Fatalf("deleting: %v %+v", s, env)
	}
	if s, _ := allocState(a.ID); s != sessions.AllocationCleaningUp {
		t.Fatalf("allocation after delete: %v", s)
	}
	f.release(t, a.ID)
	got, _ = read()
	if s := sessions.StateOf(got); s != sessions.StateDeleted || got.Allocation.ID != uuid.Nil {
		t.Fatalf("released: %v %+v", s, got.Allocation)
	}
	if s, settled := allocState(a.ID); s != sessions.AllocationReleased || !settled {
		t.Fatalf("released allocation: %v settled %t", s, settled)
	}
}
