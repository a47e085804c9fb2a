package sessions_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/sessions/sessionstest"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

type fixture struct{ sessionstest.Fixture }

func newFixture(t *testing.T) fixture { return fixture{sessionstest.New(t)} }

func (f fixture) create(t *testing.T) store.SessionBundle {
	t.Helper()
	b, err := f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project})
	must(t, err)
	return b
}

// release confirms the cleanup of allocation id and releases it.
func (f fixture) release(t *testing.T, id uuid.UUID) {
	t.Helper()
	a, err := f.St.GetAllocation(f.Ctx, id)
	must(t, err)
	storetest.Release(t, f.St, a)
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
	_, err := f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "a\nb"})
	wantField(t, err, "display_name")
	_, err = f.Svc.Create(f.Ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project})
	if !errors.Is(err, sessions.ErrNoDeployment) || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Create without a deployment: %v", err)
	}

	f.Deploy(t, 10)
	for name, c := range map[string]struct {
		req   sessions.CreateRequest
		field string
	}{
		"no request id":     {sessions.CreateRequest{TenantID: f.Tenant, ProjectID: f.Project}, "request_id"},
		"too long":          {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: strings.Repeat("x", sessions.MaxDisplayNameLen+1)}, "display_name"},
		"too many runes":    {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: strings.Repeat("é", sessions.MaxDisplayNameLen+1)}, "display_name"},
		"control character": {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "tab\there"}, "display_name"},
		"invalid UTF-8":     {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "\xff"}, "display_name"},
		// Format characters (Cf) reorder or hide what a table shows.
		"bidi override":     {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "invoice\u202Efdp.exe"}, "display_name"},
		"bidi isolate":      {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "a\u2067b\u2069"}, "display_name"},
		"zero-width joiner": {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "a\u200Db"}, "display_name"},
		"byte order mark":   {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "\uFEFFname"}, "display_name"},
		"C1 control":        {sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: "a\u0085b"}, "display_name"},
	} {
		_, err := f.Svc.Create(f.Ctx, projects.All(), c.req)
		t.Run(name, func(t *testing.T) { wantField(t, err, c.field) })
	}
	page, err := f.Svc.List(f.Ctx, projects.All(), store.AgeCursor{}, 10, true)
	must(t, err)
	if len(page) != 0 {
		t.Fatalf("invalid requests created %d sessions", len(page))
	}

	// The bound is in characters, not bytes.
	req := sessions.CreateRequest{RequestID: uuid.New(), TenantID: f.Tenant, ProjectID: f.Project, DisplayName: strings.Repeat("é", sessions.MaxDisplayNameLen)}
	b, err := f.Svc.Create(f.Ctx, projects.All(), req)
	must(t, err)
	if b.Session.DisplayName != req.DisplayName || b.Session.TenantID != f.Tenant {
		t.Fatalf("created %+v", b.Session)
	}
	// A retry with another display name is not the same request.
	req.DisplayName = "other"
	_, err = f.Svc.Create(f.Ctx, projects.All(), req)
	if !errdefs.IsExists(err) {
		t.Fatalf("retry with another display name: %v", err)
	}
}

func TestReadsListInCreationOrder(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	const total = 5
	var ids, allocs []uuid.UUID
	for range total {
		b := f.create(t)
		ids = append(ids, b.Session.ID)
		allocs = append(allocs, b.Allocation.ID)
	}
	for i, id := range ids {
		b, err := f.Svc.Get(f.Ctx, projects.All(), id)
		must(t, err)
		if b.Session.ID != id || b.Allocation.ID != allocs[i] || b.Placement.NodeID != f.Node {
			t.Fatalf("get %d: %+v", i, b)
		}
		a, err := f.Svc.GetAllocation(f.Ctx, allocs[i])
		must(t, err)
		if a.ID != allocs[i] || a.SessionID != id || a.NodeID != f.Node {
			t.Fatalf("get allocation %d: %+v", i, a)
		}
	}

	// The first Session deleted, its allocation released.
	_, err := f.Svc.Delete(f.Ctx, projects.All(), ids[0])
	must(t, err)
	f.release(t, allocs[0])

	// Both listings over pages of two, the deleted Session and the released
	// allocation only when asked for.
	for _, l := range []struct {
		hidden string
		want   []uuid.UUID
		list   func(include bool) []uuid.UUID
	}{
		{"deleted", ids, func(include bool) []uuid.UUID {
			page, _ := storetest.Pages(t, 2, func(after store.AgeCursor) ([]store.SessionBundle, error) {
				return f.Svc.List(f.Ctx, projects.All(), after, 2, include)
			}, sessions.Cursor)
			return idsOf(page, func(b store.SessionBundle) uuid.UUID { return b.Session.ID })
		}},
		{"released", allocs, func(include bool) []uuid.UUID {
			page, _ := storetest.Pages(t, 2, func(after store.AgeCursor) ([]store.SessionAllocation, error) {
				return f.Svc.ListAllocations(f.Ctx, projects.All(), after, 2, include)
			}, sessions.AllocationCursor)
			return idsOf(page, func(a store.SessionAllocation) uuid.UUID { return a.ID })
		}},
	} {
		if got := l.list(true); !equalIDs(got, l.want) {
			t.Fatalf("listed %v\nwant %v", got, l.want)
		}
		if got := l.list(false); !equalIDs(got, l.want[1:]) {
			t.Fatalf("listed %v without %s\nwant %v", got, l.hidden, l.want[1:])
		}
	}

	// Unknown ids are not found.
	if _, err := f.Svc.Get(f.Ctx, projects.All(), uuid.New()); !errdefs.IsNotFound(err) {
		t.Fatalf("get unknown session: %v", err)
	}
	if _, err := f.Svc.Delete(f.Ctx, projects.All(), uuid.New()); !errdefs.IsNotFound(err) {
		t.Fatalf("delete unknown session: %v", err)
	}
	if _, err := f.Svc.GetAllocation(f.Ctx, uuid.New()); !errdefs.IsNotFound(err) {
		t.Fatalf("get unknown allocation: %v", err)
	}
}

// idsOf returns the id of each item, in order.
func idsOf[T any](items []T, id func(T) uuid.UUID) []uuid.UUID {
	out := make([]uuid.UUID, len(items))
	for i, item := range items {
		out[i] = id(item)
	}
	return out
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
	f.Deploy(t, 10)
	b := f.create(t)
	read := func() (store.SessionBundle, sessions.Environment) {
		t.Helper()
		b, err := f.Svc.Get(f.Ctx, projects.All(), b.Session.ID)
		must(t, err)
		r, err := f.Svc.Readiness(f.Ctx, b)
		must(t, err)
		return b, sessions.EnvironmentOf(b, r[b.Allocation.ID])
	}
	allocState := func(id uuid.UUID) (sessions.AllocationState, bool) {
		t.Helper()
		a, err := f.Svc.GetAllocation(f.Ctx, id)
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

	a, err := f.St.ClaimCreate(f.Ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	if s, settled := allocState(a.ID); s != sessions.AllocationCreating || settled {
		t.Fatalf("dispatched allocation: %v settled %t", s, settled)
	}
	_, err = f.St.RecordCreateOutcome(f.Ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-1", BootstrapComplete: true})
	must(t, err)
	got, env = read()
	if s := sessions.StateOf(got); s != sessions.StateActive || env != (sessions.Environment{ComputeAvailable: true, ComputePhase: sessions.ComputeRunning}) {
		t.Fatalf("running session: %v %+v", s, env)
	}
	if s, settled := allocState(a.ID); s != sessions.AllocationActive || !settled {
		t.Fatalf("running allocation: %v settled %t", s, settled)
	}

	// The Runtime connects, then reports its preparation.
	sealed, err := f.St.GetAllocationCredential(f.Ctx, a.ID)
	must(t, err)
	cred, err := f.Key.Open(sealed.Nonce, sealed.Ciphertext, secrets.DeviceCredential(f.Installation, a.ID))
	must(t, err)
	g, err := f.St.AcceptRuntime(f.Ctx, store.AcceptRuntimeParams{
		ConnectionID: uuid.New(), DeviceID: b.Allocation.DeviceID, Credential: runtimebootstrap.NewSecret(string(cred)),
	})
	must(t, err)
	_, env = read()
	if env != (sessions.Environment{ComputeAvailable: true, RuntimeConnected: true, ComputePhase: sessions.ComputeRunning}) {
		t.Fatalf("connected: %+v", env)
	}
	_, err = f.St.MarkRuntimePrepared(f.Ctx, g.Conn)
	must(t, err)
	_, env = read()
	if env != (sessions.Environment{ComputeAvailable: true, RuntimeConnected: true, CapabilitiesPrepared: true, ExecutionAdmitted: true, ComputePhase: sessions.ComputeRunning}) {
		t.Fatalf("prepared: %+v", env)
	}

	// Deletion: no longer admitted; deleting while the allocation is
	// owned, deleted once it is released.
	del, err := f.Svc.Delete(f.Ctx, projects.All(), b.Session.ID)
	must(t, err)
	r, err := f.Svc.Readiness(f.Ctx, del)
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

// TestCountByStateAgreesWithStateOf: the metrics' count of Sessions by
// state is what StateOf says of each Session the API lists, deleted
// Sessions left out.
func TestCountByStateAgreesWithStateOf(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	running := func() store.SessionBundle {
		b := f.create(t)
		a, err := f.St.ClaimCreate(f.Ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
		must(t, err)
		_, err = f.St.RecordCreateOutcome(f.Ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-" + a.ID.String(), BootstrapComplete: true})
		must(t, err)
		return b
	}
	f.create(t)
	f.create(t) // two provisioning
	running()   // one active
	deleting := running()
	_, err := f.Svc.Delete(f.Ctx, projects.All(), deleting.Session.ID)
	must(t, err)
	deleted := f.create(t)
	_, err = f.Svc.Delete(f.Ctx, projects.All(), deleted.Session.ID)
	must(t, err)
	f.release(t, deleted.Allocation.ID)
	// Two archived: one still cleaning up, one released; both counted.
	for i, b := range []store.SessionBundle{running(), f.create(t)} {
		_, err = f.Svc.Archive(f.Ctx, projects.All(), b.Session.ID, store.NewAdminProvenance(uuid.New()))
		must(t, err)
		if i == 1 {
			f.release(t, b.Allocation.ID)
		}
	}

	want := map[sessions.State]int64{}
	list, err := f.Svc.List(f.Ctx, projects.All(), store.AgeCursor{}, 100, false)
	must(t, err)
	for _, b := range list {
		want[sessions.StateOf(b)]++
	}
	got, err := f.Svc.CountByState(f.Ctx)
	must(t, err)
	if len(got) != len(want) || want[sessions.StateProvisioning] != 2 || want[sessions.StateActive] != 1 || want[sessions.StateDeleting] != 1 ||
		want[sessions.StateArchived] != 2 {
		t.Fatalf("counts %v, listed states %v", got, want)
	}
	for s, n := range want {
		if got[s] != n {
			t.Errorf("%v: counted %d, listed %d", s, got[s], n)
		}
	}
}
