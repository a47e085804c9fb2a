package auditadmin_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/audit"
	"berth.dev/core/auditadmin"
	"berth.dev/core/projectadmin"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// fixture is a real admin server serving ProjectService and AuditService
// over a real store, recording calls with the audit Writer, with a
// project key.
type fixture struct {
	adminv1.AuditServiceClient
	projects adminv1.ProjectServiceClient
	st       *storetest.Store
	ctx      context.Context // carries the admin token
	keyCtx   context.Context // carries the project key
	plain    context.Context
	project  string
	keyID    uuid.UUID
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	st, ctx := storetest.Parallel(t)
	svc, err := projects.NewService(st, uuid.New)
	errdefstest.Must(t, err)
	key := make([]byte, admin.MinPageTokenKeyBytes)
	_, err = rand.Read(key)
	errdefstest.Must(t, err)
	pages, err := admin.NewPageTokens(key)
	errdefstest.Must(t, err)
	keys, err := projects.NewKeys(st)
	errdefstest.Must(t, err)
	projectSrv, err := projectadmin.New(svc, keys, pages)
	errdefstest.Must(t, err)
	auditSrv := auditadmin.New(audit.NewTrail(st.Reader), pages)

	tenant, _, err := st.CreateTenant(ctx, uuid.New(), uuid.New(), "t")
	errdefstest.Must(t, err)
	p, _, err := st.CreateProject(ctx, uuid.New(), uuid.New(), tenant.ID, "p")
	errdefstest.Must(t, err)
	tok, id, digest, err := projects.NewKeyToken()
	errdefstest.Must(t, err)
	_, _, err = st.CreateProjectKey(ctx, store.NewProjectKey{RequestID: uuid.New(), ID: id, ProjectID: p.ID, Digest: digest[:]})
	errdefstest.Must(t, err)
	index := projects.NewKeyIndex(st.Reader, time.Now)
	errdefstest.Must(t, index.Load(ctx))

	w := audit.NewWriter(st.Admin, slog.New(slog.NewTextHandler(io.Discard, nil)))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	cc, token := admintest.Serve(t, admin.Options{Keys: index, Audit: w, Services: []admin.Service{projectSrv, auditSrv}})
	return fixture{
		AuditServiceClient: adminv1.NewAuditServiceClient(cc), projects: adminv1.NewProjectServiceClient(cc), st: st,
		ctx: admintest.Authed(ctx, token), keyCtx: admintest.Authed(ctx, tok.Reveal()), plain: ctx,
		project: admin.ProjectName.Format(tenant.ID.String(), p.ID.String()), keyID: id,
	}
}

var far = timestamppb.New(time.Now().Add(time.Hour))

// list reads every event of req, in pages of req's size.
func (f fixture) list(t *testing.T, req *adminv1.ListAuditEventsRequest) []*adminv1.AuditEvent {
	t.Helper()
	var out []*adminv1.AuditEvent
	for {
		resp, err := f.ListAuditEvents(f.ctx, req)
		errdefstest.Must(t, err)
		out = append(out, resp.GetAuditEvents()...)
		if resp.GetNextPageToken() == "" {
			return out
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// TestListAuditEvents: the administrator's calls through the real server
// are listed with their actor, action, resource, request id and outcome,
// oldest first, in pages; each filter narrows; the default end (now - 5 s)
// leaves out what was recorded just now; the administrator's listing is
// not itself recorded (a key's is, as a denied call).
func TestListAuditEvents(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		_, err := f.projects.CreateTenant(f.ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "n" + string(rune('a'+i))}})
		errdefstest.Must(t, err)
	}
	_, err := f.projects.DeleteTenant(f.ctx, &adminv1.DeleteTenantRequest{Name: admin.TenantName.Format(uuid.NewString())})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	// A key's call of a method keys may not call: recorded, in its
	// project, once the queue drains.
	_, err = f.projects.ListTenants(f.keyCtx, &adminv1.ListTenantsRequest{})
	admintest.WantStatus(t, err, codes.PermissionDenied, admin.ReasonKeyMethodDenied)
	_, err = f.ListAuditEvents(f.keyCtx, &adminv1.ListAuditEventsRequest{})
	admintest.WantStatus(t, err, codes.PermissionDenied, admin.ReasonKeyMethodDenied)
	deadline := time.Now().Add(10 * time.Second)
	for len(f.list(t, &adminv1.ListAuditEventsRequest{EndTime: far})) < 8 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}

	all := f.list(t, &adminv1.ListAuditEventsRequest{EndTime: far, PageSize: 2})
	if len(all) != 8 {
		t.Fatalf("listed %d events, want 5 creates, a refused delete and two denied key calls", len(all))
	}
	for i, e := range all[:5] {
		if e.GetActor() != "admin" || e.GetAction() != "call.project_service.create_tenant" || e.GetResource() != "" ||
			e.GetOutcome() != "ok" || e.GetKind() != adminv1.AuditEvent_KIND_CALL || e.GetRequestId() == "" || e.GetOccurTime() == nil {
			t.Fatalf("event %d: %v", i, e)
		}
		if i > 0 && e.GetOccurTime().AsTime().Before(all[i-1].GetOccurTime().AsTime()) {
			t.Fatal("events out of order")
		}
	}
	if e := all[5]; e.GetAction() != "call.project_service.delete_tenant" || e.GetOutcome() != "not_found" || e.GetResource() == "" {
		t.Fatalf("the refused delete: %v", e)
	}
	key := "key:" + f.keyID.String()
	for name, c := range map[string]struct {
		req  *adminv1.ListAuditEventsRequest
		want int
	}{
		"admin":     {&adminv1.ListAuditEventsRequest{Actor: "admin"}, 6},
		"key":       {&adminv1.ListAuditEventsRequest{Actor: key}, 2},
		"core":      {&adminv1.ListAuditEventsRequest{Actor: "core"}, 0},
		"project":   {&adminv1.ListAuditEventsRequest{Project: f.project}, 2},
		"prefix":    {&adminv1.ListAuditEventsRequest{ActionPrefix: "call.project_service.create"}, 5},
		"resource":  {&adminv1.ListAuditEventsRequest{Resource: all[5].GetResource()}, 1},
		"outcome":   {&adminv1.ListAuditEventsRequest{Outcome: string(admin.ReasonKeyMethodDenied)}, 2},
		"start":     {&adminv1.ListAuditEventsRequest{StartTime: all[5].GetOccurTime()}, 3},
		"all pages": {&adminv1.ListAuditEventsRequest{PageSize: 1}, 8},
	} {
		c.req.EndTime = far
		got := f.list(t, c.req)
		if len(got) != c.want {
			t.Errorf("%s: listed %d, want %d", name, len(got), c.want)
		}
	}
	if got := f.list(t, &adminv1.ListAuditEventsRequest{Project: f.project, EndTime: far}); got[0].GetActor() != key || got[0].GetProject() != f.project {
		t.Fatalf("the key's event: %v", got[0])
	}
	if got := f.list(t, &adminv1.ListAuditEventsRequest{}); len(got) != 0 {
		t.Fatalf("the default end (now - 5 s) listed %d events recorded just now", len(got))
	}
	if got := f.list(t, &adminv1.ListAuditEventsRequest{EndTime: far, ActionPrefix: "call.audit_service", Actor: "admin"}); len(got) != 0 {
		t.Fatalf("listing was recorded: %v", got)
	}
}

// TestListAuditEventsRefusals: malformed filters are INVALID_ARGUMENT
// naming the field; a page token is refused with other filters; without
// a credential the call is unauthenticated.
func TestListAuditEventsRefusals(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		_, err := f.projects.CreateTenant(f.ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "r" + string(rune('a'+i))}})
		errdefstest.Must(t, err)
	}
	for field, req := range map[string]*adminv1.ListAuditEventsRequest{
		"actor":         {Actor: "bob"},
		"actor ":        {Actor: "key:" + uuid.Nil.String()},
		"project":       {Project: "tenants/x"},
		"end_time":      {StartTime: far, EndTime: timestamppb.New(time.Now())},
		"outcome":       {Outcome: "a\nb"},
		"page_size":     {PageSize: -1},
		"page_token":    {PageToken: "nope"},
		"action_prefix": {ActionPrefix: string(make([]byte, 300))},
	} {
		_, err := f.ListAuditEvents(f.ctx, req)
		want := field
		if field == "actor " {
			want = "actor"
		}
		admintest.WantInvalidField(t, err, want)
	}
	resp, err := f.ListAuditEvents(f.ctx, &adminv1.ListAuditEventsRequest{EndTime: far, PageSize: 1})
	errdefstest.Must(t, err)
	if resp.GetNextPageToken() == "" {
		t.Fatal("no next page")
	}
	_, err = f.ListAuditEvents(f.ctx, &adminv1.ListAuditEventsRequest{EndTime: far, PageSize: 1, Actor: "admin", PageToken: resp.GetNextPageToken()})
	admintest.WantInvalidField(t, err, "page_token")
	_, err = f.ListAuditEvents(f.plain, &adminv1.ListAuditEventsRequest{})
	admintest.WantStatus(t, err, codes.Unauthenticated, admin.ReasonUnauthenticated)
}
