package audit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	_ "berth.dev/proto/berth/admin/v1" // registers the berth.admin.v1 files
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/audit"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// far is past every event a test records: listings do not wait out the
// default end (now() - 5 s).
var far = time.Now().Add(time.Hour)

// reasonRefused is the refusal the stub answers when told to.
const reasonRefused = "project_has_sessions"

// stub serves every berth.admin.v1 method from the proto registry: each
// decodes its request and answers an empty response, or the refusal
// while refuse is set. The real adapters' behaviour is theirs; what is
// tested here is that every method the table calls mutating is audited
// through the real admin server.
type stub struct {
	refuse  atomic.Bool
	methods map[string]protoreflect.MethodDescriptor
}

func newStub(t *testing.T) *stub {
	s := &stub{methods: map[string]protoreflect.MethodDescriptor{}}
	protoregistry.GlobalFiles.RangeFilesByPackage("berth.admin.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			svc := f.Services().Get(i)
			for j := range svc.Methods().Len() {
				m := svc.Methods().Get(j)
				s.methods["/"+string(svc.FullName())+"/"+string(m.Name())] = m
			}
		}
		return true
	})
	if len(s.methods) == 0 {
		t.Fatal("no berth.admin.v1 method registered")
	}
	return s
}

func (s *stub) answer(out protoreflect.MessageDescriptor) (any, error) {
	if s.refuse.Load() {
		return nil, errdefs.Refuse(errdefs.ErrFailedPrecondition, reasonRefused, "refused by the test")
	}
	return dynamicpb.NewMessage(out), nil
}

func (s *stub) Register(g *grpc.Server) {
	descs := map[string]*grpc.ServiceDesc{}
	for full, m := range s.methods {
		svc := string(m.Parent().FullName())
		d := descs[svc]
		if d == nil {
			d = &grpc.ServiceDesc{ServiceName: svc, HandlerType: (*any)(nil)}
			descs[svc] = d
		}
		in, out := m.Input(), m.Output()
		if m.IsStreamingServer() {
			d.Streams = append(d.Streams, grpc.StreamDesc{StreamName: string(m.Name()), ServerStreams: true,
				Handler: func(_ any, ss grpc.ServerStream) error {
					if err := ss.RecvMsg(dynamicpb.NewMessage(in)); err != nil {
						return err
					}
					resp, err := s.answer(out)
					if err != nil {
						return err
					}
					return ss.SendMsg(resp)
				}})
			continue
		}
		d.Methods = append(d.Methods, grpc.MethodDesc{MethodName: string(m.Name()),
			Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				req := dynamicpb.NewMessage(in)
				if err := dec(req); err != nil {
					return nil, err
				}
				h := func(context.Context, any) (any, error) { return s.answer(out) }
				if icpt == nil {
					return h(ctx, req)
				}
				return icpt(ctx, req, &grpc.UnaryServerInfo{FullMethod: full}, h)
			}})
	}
	for _, d := range descs {
		g.RegisterService(d, s)
	}
}

// failing is a Store whose writes fail.
type failing struct{}

func (failing) RecordAuditEvent(context.Context, store.Provenance, store.AuditEntry) error {
	return errors.New("audit insert failed")
}

// fixture is a real admin server over a stub of every admin method, with
// the audit Writer over a real store, a key index and one project key.
type fixture struct {
	st     *storetest.Store
	ctx    context.Context
	stub   *stub
	writer *audit.Writer
	logs   *syncBuffer
	cc     *grpc.ClientConn
	admin  string
	key    projects.Key
	token  string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

func newFixture(t *testing.T, st audit.Store) fixture {
	t.Helper()
	db, ctx := storetest.Parallel(t)
	tenant, _, err := db.CreateTenant(ctx, uuid.New(), uuid.New(), "t")
	must(t, err)
	p, _, err := db.CreateProject(ctx, uuid.New(), uuid.New(), tenant.ID, "p")
	must(t, err)
	tok, id, digest, err := projects.NewKeyToken()
	must(t, err)
	_, _, err = db.CreateProjectKey(ctx, store.NewProjectKey{RequestID: uuid.New(), ID: id, ProjectID: p.ID, Digest: digest[:]})
	must(t, err)
	index := projects.NewKeyIndex(db.Reader, time.Now)
	must(t, index.Load(ctx))
	if st == nil {
		st = db.Admin
	}
	logs := &syncBuffer{}
	w := audit.NewWriter(st, slog.New(slog.NewTextHandler(logs, nil)))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	s := newStub(t)
	cc, token := admintest.Serve(t, admin.Options{Keys: index, Audit: w, Services: []admin.Service{s}})
	return fixture{st: db, ctx: ctx, stub: s, writer: w, logs: logs, cc: cc, admin: token,
		key: projects.Key{ID: id, ProjectID: p.ID, TenantID: tenant.ID}, token: tok.Reveal()}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// call invokes method with a request whose request_id (when it has one)
// is rid and every other string field is fill, as bearer token; it
// returns the berth-request-id header and the error.
func (f fixture) call(t *testing.T, method, token string, rid uuid.UUID, fill string) (string, error) {
	t.Helper()
	m := f.stub.methods[method]
	req := dynamicpb.NewMessage(m.Input())
	fields := m.Input().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Kind() != protoreflect.StringKind || fd.Cardinality() == protoreflect.Repeated {
			continue
		}
		v := fill
		if fd.Name() == "request_id" {
			v = rid.String()
		}
		if v != "" {
			req.Set(fd, protoreflect.ValueOfString(v))
		}
	}
	ctx := f.ctx
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	var header metadata.MD
	if m.IsStreamingServer() {
		s, err := f.cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
		if err != nil {
			return "", err
		}
		must(t, s.SendMsg(req))
		must(t, s.CloseSend())
		err = s.RecvMsg(dynamicpb.NewMessage(m.Output()))
		header, _ = s.Header()
		return strings.Join(header.Get(admin.RequestIDHeader), ","), err
	}
	err := f.cc.Invoke(ctx, method, req, dynamicpb.NewMessage(m.Output()), grpc.Header(&header))
	return strings.Join(header.Get(admin.RequestIDHeader), ","), err
}

// events lists every event recorded so far.
func (f fixture) events(t *testing.T) []store.AuditEvent {
	t.Helper()
	var out []store.AuditEvent
	after := store.AuditCursor{}
	for {
		page, err := f.st.ListAuditEvents(f.ctx, store.AuditFilter{End: &far}, after, 100)
		must(t, err)
		out = append(out, page...)
		if len(page) < 100 {
			return out
		}
		after = store.AuditCursor{OccurredAt: page[99].OccurredAt, ID: page[99].ID}
	}
}

// TestEveryMutatingCallIsRecorded: through the real admin server, each
// berth.admin.v1 method the table calls mutating records exactly one call
// event (the administrator, the call's request id, which the
// berth-request-id header returns, and its outcome); a read records
// none; a refused call records its reason.
func TestEveryMutatingCallIsRecorded(t *testing.T) {
	f := newFixture(t, nil)
	names, mutating := admin.Methods()
	type sent struct {
		method string
		rid    string
	}
	var calls []sent
	for _, refuse := range []bool{false, true} {
		f.stub.refuse.Store(refuse)
		for _, m := range names {
			rid := uuid.New()
			header, err := f.call(t, m, f.admin, rid, "")
			if refuse {
				admintest.WantStatus(t, err, codes.FailedPrecondition, reasonRefused)
			} else {
				must(t, err)
			}
			if _, err := uuid.Parse(header); err != nil {
				t.Fatalf("%s: berth-request-id %q", m, header)
			}
			if f.stub.methods[m].Input().Fields().ByName("request_id") != nil && header != rid.String() {
				t.Fatalf("%s: berth-request-id %s, want the request's %s", m, header, rid)
			}
			calls = append(calls, sent{m, header})
		}
	}
	got := map[string][]store.AuditEvent{}
	for _, e := range f.events(t) {
		got[e.Action] = append(got[e.Action], e)
	}
	for i, c := range calls {
		outcome := "ok"
		if i >= len(names) {
			outcome = reasonRefused
		}
		var match []store.AuditEvent
		for _, e := range got[admin.CallAction(c.method)] {
			if e.RequestID.String() == c.rid {
				match = append(match, e)
			}
		}
		switch {
		case !mutating[c.method] && len(match) != 0:
			t.Errorf("%s reads but recorded %d events", c.method, len(match))
		case mutating[c.method] && len(match) != 1:
			t.Errorf("%s (%s) recorded %d events, want 1", c.method, outcome, len(match))
		case mutating[c.method] && (match[0].Actor() != "admin" || match[0].Outcome != outcome || match[0].Kind != store.AuditCall):
			t.Errorf("%s: event %+v, want admin, %s", c.method, match[0], outcome)
		}
	}
	if f.writer.Failures() != 0 {
		t.Fatalf("%d writes failed", f.writer.Failures())
	}
}

// TestKeyCallsAndUnauthenticatedCalls: a project key's mutating call is
// recorded as the key with its project; its call of a method keys may
// not call is refused by the tap and recorded (queued, then written) as
// project_key_method_denied; calls without a valid credential (none, a
// wrong admin token, an unknown key) are never recorded.
func TestKeyCallsAndUnauthenticatedCalls(t *testing.T) {
	f := newFixture(t, nil)
	create, retire := "/berth.admin.v1.SessionService/CreateSession", "/berth.admin.v1.NodeService/RetireNode"
	rid := uuid.New()
	_, err := f.call(t, create, f.token, rid, "")
	must(t, err)
	_, err = f.call(t, retire, f.token, uuid.New(), "")
	admintest.WantStatus(t, err, codes.PermissionDenied, admin.ReasonKeyMethodDenied)
	unknownKey, _, _, err := projects.NewKeyToken()
	must(t, err)
	for _, token := range []string{"", admin.TokenPrefix + "AAAA", unknownKey.Reveal()} {
		for _, m := range []string{create, retire} {
			if _, err := f.call(t, m, token, uuid.New(), ""); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("%s without a valid credential: %v", m, err)
			}
		}
	}
	var events []store.AuditEvent
	deadline := time.Now().Add(10 * time.Second)
	for len(events) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		events = f.events(t)
	}
	time.Sleep(200 * time.Millisecond) // anything else queued lands too
	events = f.events(t)
	if len(events) != 2 {
		t.Fatalf("recorded %d events, want the key's create and its denied call: %+v", len(events), events)
	}
	byAction := map[string]store.AuditEvent{}
	for _, e := range events {
		byAction[e.Action] = e
		if e.Actor() != "key:"+f.key.ID.String() || e.ProjectID == nil || *e.ProjectID != f.key.ProjectID || *e.TenantID != f.key.TenantID {
			t.Fatalf("event %+v, want the key in its project", e)
		}
	}
	if e := byAction[admin.CallAction(create)]; e.Outcome != "ok" || e.RequestID != rid {
		t.Fatalf("the key's create: %+v", e)
	}
	if e := byAction[admin.CallAction(retire)]; e.Outcome != string(admin.ReasonKeyMethodDenied) {
		t.Fatalf("the key's denied call: %+v", e)
	}
}

// TestWriteFailureLeavesTheAnswer: a Writer whose insert fails leaves a
// mutating call's answer as the handler gave it (success, and the
// refusal) and counts each failure.
func TestWriteFailureLeavesTheAnswer(t *testing.T) {
	f := newFixture(t, failing{})
	create := "/berth.admin.v1.ProjectService/CreateTenant"
	if _, err := f.call(t, create, f.admin, uuid.New(), ""); err != nil {
		t.Fatalf("the call failed with its audit write: %v", err)
	}
	f.stub.refuse.Store(true)
	_, err := f.call(t, create, f.admin, uuid.New(), "")
	admintest.WantStatus(t, err, codes.FailedPrecondition, reasonRefused)
	if n := f.writer.Failures(); n != 2 {
		t.Fatalf("%d failures counted, want 2", n)
	}
	if !strings.Contains(f.logs.String(), "audit event not recorded") {
		t.Fatalf("the failure was not logged: %q", f.logs.String())
	}
}

// TestNothingSecretIsRecorded feeds a secret into every string field of
// every request, and calls with the admin token and the key: neither the
// secret nor a token is in the audit table or the logs.
func TestNothingSecretIsRecorded(t *testing.T) {
	f := newFixture(t, nil)
	secret := "s3cret-" + uuid.NewString()
	names, _ := admin.Methods()
	for _, m := range names {
		_, _ = f.call(t, m, f.admin, uuid.New(), secret)
		_, _ = f.call(t, m, f.token, uuid.New(), "sessions/"+secret)
		_, _ = f.call(t, m, f.admin, uuid.New(), "sessions/"+secret)
	}
	time.Sleep(200 * time.Millisecond) // queued denials land
	var dump string
	must(t, f.st.Pool().QueryRow(f.ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM audit_events t`).Scan(&dump))
	if dump == "" {
		t.Fatal("nothing was recorded")
	}
	for what, s := range map[string]string{"secret": secret, "admin token": f.admin, "key token": f.token} {
		if strings.Contains(dump, s) || strings.Contains(f.logs.String(), s) {
			t.Errorf("the %s reached the audit trail or its logs", what)
		}
	}
}
