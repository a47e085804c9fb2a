package sessionadmin_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

func TestGRPCRefusesUnauthenticated(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 4)
	c := f.serve(t)
	admintest.WantUnauthenticated(t, f.Ctx, c.token, func(ctx context.Context) []error {
		_, createErr := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
		_, sessionsErr := c.ListSessions(ctx, &adminv1.ListSessionsRequest{})
		_, allocationsErr := c.ListAllocations(ctx, &adminv1.ListAllocationsRequest{})
		return []error{createErr, sessionsErr, allocationsErr}
	})
	page, err := f.Svc.List(f.Ctx, projects.All(), store.AgeCursor{}, admin.DefaultPageSize, true)
	errdefstest.Must(t, err)
	if len(page) != 0 {
		t.Fatalf("unauthenticated calls created %d sessions", len(page))
	}
}

func TestGRPCCreateSession(t *testing.T) {
	f := newFixture(t)
	c := f.serve(t)
	ctx := c.authed(f.Ctx)

	// No deployment: refused with its own message, nothing created.
	req := &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: "first"}}
	_, err := c.CreateSession(ctx, req)
	if s := admintest.WantStatus(t, err, codes.FailedPrecondition, "no_deployment"); s.Message() != "no deployment is committed: commit one with DeploymentService.CommitDeployment" {
		t.Fatalf("message %q", s.Message())
	}

	f.Deploy(t, 1)
	created, err := c.CreateSession(ctx, req)
	errdefstest.Must(t, err)
	s := created.GetSession()
	id := strings.TrimPrefix(s.GetName(), "sessions/")
	if !admin.UUIDID(id) || s.GetDisplayName() != "first" || s.GetState() != adminv1.Session_STATE_PROVISIONING ||
		s.GetCreateTime() == nil || s.GetDeleteTime() != nil || s.GetNode() != "nodes/"+f.Node.String() ||
		!strings.HasPrefix(s.GetAllocation(), "allocations/") {
		t.Fatalf("created %v", s)
	}
	if !proto.Equal(s.GetEnvironment(), &adminv1.Environment{}) {
		t.Fatalf("environment %v, want nothing established", s.GetEnvironment())
	}
	b, err := f.St.GetSession(f.Ctx, uuid.MustParse(id))
	errdefstest.Must(t, err)
	if b.Session.TenantID != f.Tenant {
		t.Fatal("the Session is not the configured tenant's")
	}

	// An idempotent retry returns the same Session; another display name
	// with the same request id is ALREADY_EXISTS.
	again, err := c.CreateSession(ctx, req)
	errdefstest.Must(t, err)
	if !proto.Equal(again.GetSession(), s) {
		t.Fatalf("retry %v\nwant %v", again.GetSession(), s)
	}
	_, err = c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: req.RequestId, Session: &adminv1.Session{DisplayName: "other"}})
	admintest.WantStatus(t, err, codes.AlreadyExists, admin.ReasonExists)

	// The node holds max_active: no capacity.
	_, err = c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	if s := admintest.WantStatus(t, err, codes.FailedPrecondition, "no_ready_node_with_capacity"); !strings.HasPrefix(s.Message(), "no ready node has capacity: ") {
		t.Fatalf("message %q", s.Message())
	}

	// Invalid requests name their field.
	for field, r := range map[string]*adminv1.CreateSessionRequest{
		"request_id":           {},
		"session.display_name": {RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: strings.Repeat("x", 64)}},
		"session.name":         {RequestId: uuid.NewString(), Session: &adminv1.Session{Name: "sessions/" + uuid.NewString()}},
		"session.state":        {RequestId: uuid.NewString(), Session: &adminv1.Session{State: adminv1.Session_STATE_ACTIVE}},
		"session.create_time":  {RequestId: uuid.NewString(), Session: &adminv1.Session{CreateTime: timestamppb.Now()}},
		"session.environment":  {RequestId: uuid.NewString(), Session: &adminv1.Session{Environment: &adminv1.Environment{}}},
		"session.node":         {RequestId: uuid.NewString(), Session: &adminv1.Session{Node: "nodes/" + f.Node.String()}},
	} {
		_, err := c.CreateSession(ctx, r)
		t.Run(field, func(t *testing.T) { admintest.WantInvalidField(t, err, field) })
	}
	_, err = c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: "retry-1"})
	admintest.WantInvalidField(t, err, "request_id")
	_, err = c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: "a\nb"}})
	admintest.WantInvalidField(t, err, "session.display_name")

	// A disabled provider refuses creation with its reason and what to do;
	// deletion goes on.
	_, err = f.St.SetProviderDisabled(f.Ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	errdefstest.Must(t, err)
	_, err = c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	if s := admintest.WantStatus(t, err, codes.FailedPrecondition, "provider_disabled"); s.Message() != "the sandbox provider is disabled: enable it with DeploymentService.EnableProvider" {
		t.Fatalf("message %q", s.Message())
	}
	if _, err := c.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: s.GetName()}); err != nil {
		t.Fatalf("delete while disabled: %v", err)
	}

}

func TestGRPCSessionLifecycleAndLists(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	c := f.serve(t)
	ctx := c.authed(f.Ctx)
	const total = 5
	var names, allocs []string
	for range total {
		r, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
		errdefstest.Must(t, err)
		names = append(names, r.GetSession().GetName())
		allocs = append(allocs, r.GetSession().GetAllocation())
	}

	// Compute observed running with completed bootstrap: ACTIVE.
	allocID := uuid.MustParse(strings.TrimPrefix(allocs[0], "allocations/"))
	a, err := f.St.GetAllocation(f.Ctx, allocID)
	errdefstest.Must(t, err)
	a, err = f.St.ClaimCreate(f.Ctx, a.ID, a.CreateReceipt)
	errdefstest.Must(t, err)
	a, err = f.St.RecordCreateOutcome(f.Ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "native-provider-id-0123", BootstrapComplete: true})
	errdefstest.Must(t, err)
	got, err := c.GetSession(ctx, &adminv1.GetSessionRequest{Name: names[0]})
	errdefstest.Must(t, err)
	if s := got.GetSession(); s.GetState() != adminv1.Session_STATE_ACTIVE ||
		!proto.Equal(s.GetEnvironment(), &adminv1.Environment{ComputeAvailable: true, ComputePhase: adminv1.ComputePhase_COMPUTE_PHASE_RUNNING}) {
		t.Fatalf("running session %v", s)
	}
	// Observed missing (removed from outside): still ACTIVE, compute not
	// available, with the observation's fixed code; running again: back.
	for _, o := range []struct {
		compute store.ObservedCompute
		reason  string
		want    *adminv1.Environment
	}{
		{store.ObservedMissing, "compute_missing", &adminv1.Environment{ComputeReason: "compute_missing", ComputePhase: adminv1.ComputePhase_COMPUTE_PHASE_RUNNING}},
		{store.ObservedRunning, "compute_running", &adminv1.Environment{ComputeAvailable: true, ComputePhase: adminv1.ComputePhase_COMPUTE_PHASE_RUNNING}},
	} {
		_, err = f.St.RecordObservation(f.Ctx, store.RecordObservationParams{ID: a.ID, Revision: a.Revision, Compute: o.compute, Reason: o.reason})
		errdefstest.Must(t, err)
		got, err = c.GetSession(ctx, &adminv1.GetSessionRequest{Name: names[0]})
		errdefstest.Must(t, err)
		if s := got.GetSession(); s.GetState() != adminv1.Session_STATE_ACTIVE || !proto.Equal(s.GetEnvironment(), o.want) {
			t.Fatalf("session observed %s: %v", o.compute, s)
		}
	}
	ga, err := c.GetAllocation(ctx, &adminv1.GetAllocationRequest{Name: allocs[0]})
	errdefstest.Must(t, err)
	al := ga.GetAllocation()
	if al.GetName() != allocs[0] || al.GetSession() != names[0] || al.GetNode() != "nodes/"+f.Node.String() ||
		al.GetState() != adminv1.Allocation_STATE_ACTIVE || al.GetGeneration() != 1 || !al.GetCreateSettled() ||
		!al.GetBootstrapComplete() || al.GetCreateTime() == nil || al.GetReleaseTime() != nil {
		t.Fatalf("allocation %v", al)
	}
	wantNoProviderID(t, ga)

	// Delete: DELETING while the allocation is owned; again: unchanged.
	del, err := c.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: names[0]})
	errdefstest.Must(t, err)
	if s := del.GetSession(); s.GetState() != adminv1.Session_STATE_DELETING || s.GetDeleteTime() == nil ||
		s.GetAllocation() != allocs[0] || s.GetEnvironment().GetComputeAvailable() {
		t.Fatalf("deleted session %v", s)
	}
	again, err := c.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: names[0]})
	errdefstest.Must(t, err)
	if !proto.Equal(again.GetSession(), del.GetSession()) {
		t.Fatalf("deleting again changed %v", again.GetSession())
	}
	ga, err = c.GetAllocation(ctx, &adminv1.GetAllocationRequest{Name: allocs[0]})
	errdefstest.Must(t, err)
	if ga.GetAllocation().GetState() != adminv1.Allocation_STATE_CLEANING_UP {
		t.Fatalf("allocation after delete %v", ga.GetAllocation())
	}

	// Cleanup confirmed and released: DELETED, hidden unless asked for.
	a, err = f.St.GetAllocation(f.Ctx, allocID)
	errdefstest.Must(t, err)
	storetest.Release(t, f.St, a)
	got, err = c.GetSession(ctx, &adminv1.GetSessionRequest{Name: names[0]})
	errdefstest.Must(t, err)
	if s := got.GetSession(); s.GetState() != adminv1.Session_STATE_DELETED || s.GetAllocation() != "" {
		t.Fatalf("released session %v", s)
	}
	ga, err = c.GetAllocation(ctx, &adminv1.GetAllocationRequest{Name: allocs[0]})
	errdefstest.Must(t, err)
	if al := ga.GetAllocation(); al.GetState() != adminv1.Allocation_STATE_RELEASED || al.GetReleaseTime() == nil {
		t.Fatalf("released allocation %v", al)
	}
	wantNoProviderID(t, ga)

	// Lists over more than a page, in creation order.
	admintest.WantListed(t, func(showDeleted bool, token string) ([]*adminv1.Session, string, error) {
		r, err := c.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 2, PageToken: token, ShowDeleted: showDeleted})
		return r.GetSessions(), r.GetNextPageToken(), err
	}, names, names[1:], "deleted")
	admintest.WantListed(t, func(showReleased bool, token string) ([]*adminv1.Allocation, string, error) {
		r, err := c.ListAllocations(ctx, &adminv1.ListAllocationsRequest{PageSize: 2, PageToken: token, ShowReleased: showReleased})
		wantNoProviderID(t, r)
		return r.GetAllocations(), r.GetNextPageToken(), err
	}, allocs, allocs[1:], "released")

	// A token is bound to its method and filter.
	r, err := c.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 2})
	errdefstest.Must(t, err)
	_, err = c.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 2, PageToken: r.GetNextPageToken(), ShowDeleted: true})
	admintest.WantInvalidField(t, err, "page_token")
	_, err = c.ListAllocations(ctx, &adminv1.ListAllocationsRequest{PageToken: r.GetNextPageToken()})
	admintest.WantInvalidField(t, err, "page_token")
	_, err = c.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: -1})
	admintest.WantInvalidField(t, err, "page_size")
	_, err = c.ListAllocations(ctx, &adminv1.ListAllocationsRequest{PageSize: -1})
	admintest.WantInvalidField(t, err, "page_size")

	// Bad and unknown names.
	for _, bad := range []string{"", "sessions/x", allocs[1], "sessions/" + strings.ToUpper(uuid.NewString())} {
		_, err = c.GetSession(ctx, &adminv1.GetSessionRequest{Name: bad})
		admintest.WantInvalidField(t, err, "name")
		_, err = c.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: bad})
		admintest.WantInvalidField(t, err, "name")
	}
	for _, bad := range []string{"", "allocations/x", names[1]} {
		_, err = c.GetAllocation(ctx, &adminv1.GetAllocationRequest{Name: bad})
		admintest.WantInvalidField(t, err, "name")
	}
	_, err = c.GetSession(ctx, &adminv1.GetSessionRequest{Name: "sessions/" + uuid.NewString()})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	_, err = c.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: "sessions/" + uuid.NewString()})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	_, err = c.GetAllocation(ctx, &adminv1.GetAllocationRequest{Name: "allocations/" + uuid.NewString()})
	st := admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	if st.Message() != "not found" {
		t.Fatalf("message %q, want the fixed \"not found\"", st.Message())
	}
}

// wantNoProviderID fails the test when msg carries the provider's native
// id the test recorded.
func wantNoProviderID(t *testing.T, msg proto.Message) {
	t.Helper()
	b, err := proto.Marshal(msg)
	errdefstest.Must(t, err)
	if strings.Contains(string(b), "native-provider-id") {
		t.Fatal("the response carries the provider's native id")
	}
}

// TestGRPCSettledCreateFailureStates: a Create settled by an absence
// receipt is CREATE_FAILED (create_settled and create_failed true) while
// the Session stays PROVISIONING; through cleanup and release the
// allocation keeps create_failed; after store.MaxCreateAttempts settled
// failures the Session is FAILED with the Environment's failure code.
func TestGRPCSettledCreateFailureStates(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	c := f.serve(t)
	ctx := c.authed(f.Ctx)
	r, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	name := r.GetSession().GetName()
	allocID := uuid.MustParse(strings.TrimPrefix(r.GetSession().GetAllocation(), "allocations/"))

	getSession := func() *adminv1.Session {
		t.Helper()
		got, err := c.GetSession(ctx, &adminv1.GetSessionRequest{Name: name})
		errdefstest.Must(t, err)
		return got.GetSession()
	}
	getAlloc := func(id uuid.UUID) *adminv1.Allocation {
		t.Helper()
		got, err := c.GetAllocation(ctx, &adminv1.GetAllocationRequest{Name: "allocations/" + id.String()})
		errdefstest.Must(t, err)
		return got.GetAllocation()
	}
	for attempt := 1; attempt <= store.MaxCreateAttempts; attempt++ {
		a, err := f.St.GetAllocation(f.Ctx, allocID)
		errdefstest.Must(t, err)
		a, err = f.St.ClaimCreate(f.Ctx, a.ID, a.CreateReceipt)
		errdefstest.Must(t, err)
		if al := getAlloc(a.ID); al.GetState() != adminv1.Allocation_STATE_CREATING || al.GetCreateFailed() || al.GetCreateSettled() {
			t.Fatalf("dispatched allocation %v", al)
		}
		a, err = f.St.RecordCreateOutcome(f.Ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateAbsent})
		errdefstest.Must(t, err)
		if al := getAlloc(a.ID); al.GetState() != adminv1.Allocation_STATE_CREATE_FAILED || !al.GetCreateFailed() || !al.GetCreateSettled() {
			t.Fatalf("attempt %d: failed allocation %v", attempt, al)
		}
		if s := getSession(); s.GetState() != adminv1.Session_STATE_PROVISIONING || s.GetEnvironment().GetFailureCode() != "" {
			t.Fatalf("attempt %d: session with a create_failed allocation %v", attempt, s)
		}
		a, err = f.St.ResolveCreateFailure(f.Ctx, a.ID, a.Revision)
		errdefstest.Must(t, err)
		if al := getAlloc(a.ID); al.GetState() != adminv1.Allocation_STATE_CLEANING_UP || !al.GetCreateFailed() {
			t.Fatalf("attempt %d: cleaning up %v", attempt, al)
		}
		a = storetest.Release(t, f.St, a)
		if al := getAlloc(a.ID); al.GetState() != adminv1.Allocation_STATE_RELEASED || !al.GetCreateFailed() || al.GetReleaseTime() == nil {
			t.Fatalf("attempt %d: released %v", attempt, al)
		}
		s := getSession()
		if attempt == store.MaxCreateAttempts {
			if s.GetState() != adminv1.Session_STATE_FAILED || s.GetEnvironment().GetFailureCode() != store.FailureCreateFailed || s.GetAllocation() != "" {
				t.Fatalf("session after %d failures %v", attempt, s)
			}
			break
		}
		if s.GetState() != adminv1.Session_STATE_PROVISIONING || s.GetAllocation() != "" {
			t.Fatalf("attempt %d: session waiting for a new allocation %v", attempt, s)
		}
		next, err := f.St.AllocatePending(f.Ctx, store.PendingAllocationParams{
			EnvironmentID: a.EnvironmentID, NodeID: f.Node, AllocationID: uuid.New(), DeviceID: uuid.New(),
			CredentialDigest: make([]byte, 32), CredentialCiphertext: make([]byte, 48), CredentialNonce: make([]byte, 12),
			CreateReceipt: uuid.New(),
		})
		errdefstest.Must(t, err)
		allocID = next.ID
		if s := getSession(); s.GetAllocation() != "allocations/"+next.ID.String() || s.GetState() != adminv1.Session_STATE_PROVISIONING {
			t.Fatalf("attempt %d: session with its new allocation %v", attempt, s)
		}
	}
}

// TestGRPCPageTokensKeepTheirFormat: ListSessions and ListAllocations
// mint exactly the page tokens of the format and scopes they have always
// used (a keyset cursor of the creation time in big-endian Unix
// microseconds and the id, scoped to the method and its filter), and such
// a token minted by hand lists the rows after its position, so tokens
// handed out before stay valid.
func TestGRPCPageTokensKeepTheirFormat(t *testing.T) {
	f := newFixture(t)
	f.Deploy(t, 10)
	c := f.serve(t)
	ctx := c.authed(f.Ctx)
	var names, allocs []string
	for range 3 {
		r, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
		errdefstest.Must(t, err)
		names = append(names, r.GetSession().GetName())
		allocs = append(allocs, r.GetSession().GetAllocation())
	}
	first, err := f.St.GetSession(f.Ctx, uuid.MustParse(strings.TrimPrefix(names[0], "sessions/")))
	errdefstest.Must(t, err)
	cursor := func(createdAt time.Time, id uuid.UUID) []byte {
		return append(binary.BigEndian.AppendUint64(nil, uint64(createdAt.UnixMicro())), id[:]...)
	}

	token := f.pages.Encode(cursor(first.Session.CreatedAt, first.Session.ID),
		"berth.admin.v1.SessionService/ListSessions", "show_deleted=false")
	// The server mints the same token for the same position...
	r, err := c.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 1})
	errdefstest.Must(t, err)
	if r.GetNextPageToken() != token {
		t.Fatalf("ListSessions minted %q after the first session, want %q", r.GetNextPageToken(), token)
	}
	// ...and lists the rows after it.
	r, err = c.ListSessions(ctx, &adminv1.ListSessionsRequest{PageToken: token})
	errdefstest.Must(t, err)
	var got []string
	for _, s := range r.GetSessions() {
		got = append(got, s.GetName())
	}
	if strings.Join(got, ",") != strings.Join(names[1:], ",") || r.GetNextPageToken() != "" {
		t.Fatalf("listed %v (next %q) after the first session\nwant %v", got, r.GetNextPageToken(), names[1:])
	}

	token = f.pages.Encode(cursor(first.Allocation.CreatedAt, first.Allocation.ID),
		"berth.admin.v1.AllocationService/ListAllocations", "show_released=false")
	ra, err := c.ListAllocations(ctx, &adminv1.ListAllocationsRequest{PageSize: 1})
	errdefstest.Must(t, err)
	if ra.GetNextPageToken() != token {
		t.Fatalf("ListAllocations minted %q after the first allocation, want %q", ra.GetNextPageToken(), token)
	}
	ra, err = c.ListAllocations(ctx, &adminv1.ListAllocationsRequest{PageToken: token})
	errdefstest.Must(t, err)
	got = nil
	for _, a := range ra.GetAllocations() {
		got = append(got, a.GetName())
	}
	if strings.Join(got, ",") != strings.Join(allocs[1:], ",") || ra.GetNextPageToken() != "" {
		t.Fatalf("listed %v (next %q) after the first allocation\nwant %v", got, ra.GetNextPageToken(), allocs[1:])
	}
}
