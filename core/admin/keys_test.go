package admin

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// keyed is a TurnService whose GetTurn and StreamTurnOutput record the
// principal they saw; the stream then waits for its context to end.
type keyed struct {
	adminv1.UnimplementedTurnServiceServer
	mu    sync.Mutex
	seen  []Principal
	calls int
}

func (k *keyed) record(ctx context.Context) {
	k.mu.Lock()
	k.calls++
	k.seen = append(k.seen, PrincipalFrom(ctx))
	k.mu.Unlock()
}

func (k *keyed) GetTurn(ctx context.Context, _ *adminv1.GetTurnRequest) (*adminv1.GetTurnResponse, error) {
	k.record(ctx)
	return &adminv1.GetTurnResponse{}, nil
}

func (k *keyed) StreamTurnOutput(_ *adminv1.StreamTurnOutputRequest, s grpc.ServerStreamingServer[adminv1.StreamTurnOutputResponse]) error {
	k.record(s.Context())
	if err := s.Send(&adminv1.StreamTurnOutputResponse{Data: []byte("x")}); err != nil {
		return err
	}
	<-s.Context().Done()
	return s.Context().Err()
}

func (k *keyed) Register(g *grpc.Server) { adminv1.RegisterTurnServiceServer(g, k) }

func (k *keyed) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls
}

// keyFixture is an admin server with a key index over a real store, a
// project and one of its keys.
type keyFixture struct {
	fixture
	st      *storetest.Store
	ctx     context.Context
	index   *projects.KeyIndex
	turns   *keyed
	project store.Project
	key     projects.Key
	token   string
}

func newKeyFixture(t *testing.T) keyFixture {
	t.Helper()
	st, ctx := storetest.Parallel(t)
	tenant, _, err := st.CreateTenant(ctx, uuid.New(), uuid.New(), "t")
	must(t, err)
	p, _, err := st.CreateProject(ctx, uuid.New(), uuid.New(), tenant.ID, "p")
	must(t, err)
	tok, id, digest, err := projects.NewKeyToken()
	must(t, err)
	_, _, err = st.CreateProjectKey(ctx, store.NewProjectKey{RequestID: uuid.New(), ID: id, ProjectID: p.ID, Digest: digest[:]})
	must(t, err)
	index := projects.NewKeyIndex(st.Reader, time.Now)
	must(t, index.Load(ctx))
	turns := &keyed{}
	r := &reader{}
	f := start(t, Options{Keys: index, Services: []Service{turns}}, r)
	return keyFixture{
		fixture: f, st: st, ctx: ctx, index: index, turns: turns, project: p,
		key: projects.Key{ID: id, ProjectID: p.ID, TenantID: tenant.ID}, token: tok.Reveal(),
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// as returns ctx carrying token as the bearer.
func as(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// wantCode fails unless err has code and reason.
func wantCode(t *testing.T, err error, code codes.Code, reason Reason) {
	t.Helper()
	s, info, _ := decode(t, err)
	if s.Code() != code || info.GetReason() != string(reason) {
		t.Fatalf("got %v %q (%q), want %v %s", s.Code(), info.GetReason(), s.Message(), code, reason)
	}
}

// TestProjectKeyReachesOnlyItsMethods: a live key reaches a method a key
// may call as its verified key, scoped to its project; a method it may
// not call is PERMISSION_DENIED from the headers alone (a 3 MiB body is
// never read, the handler never runs), with a fixed message.
func TestProjectKeyReachesOnlyItsMethods(t *testing.T) {
	f := newKeyFixture(t)
	ctx := as(f.ctx, f.token)
	name := TurnName.Format(uuid.NewString(), uuid.NewString())
	if _, err := adminv1.NewTurnServiceClient(f.cc).GetTurn(ctx, &adminv1.GetTurnRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	f.turns.mu.Lock()
	p := f.turns.seen[0]
	f.turns.mu.Unlock()
	if k, ok := p.Key(); !ok || k != f.key || p.Admin() || p.Scope() != projects.In(f.project.ID) || p.Actor() != "key:"+f.key.ID.String() {
		t.Fatalf("handler saw %+v", p)
	}

	_, err := adminv1.NewInstallationServiceClient(f.cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: strings.Repeat("x", 3<<20)})
	wantCode(t, err, codes.PermissionDenied, ReasonKeyMethodDenied)
	s, _, _ := decode(t, err)
	if s.Message() != msgKeyMethodDenied {
		t.Fatalf("message %q", s.Message())
	}
	if n, _ := f.read.last(); n != 0 {
		t.Fatal("a key reached an administrator's method")
	}
	// A client decodes the refusal to its class.
	if r, ok := Decode(s); !ok || r.Reason != string(ReasonKeyMethodDenied) {
		t.Fatalf("Decode: %v %v", r, ok)
	}
	// The administrator token still reaches it.
	if _, err := adminv1.NewInstallationServiceClient(f.cc).GetInstallation(f.authed(f.ctx), &adminv1.GetInstallationRequest{Name: InstallationName.Format()}); err != nil {
		t.Fatal(err)
	}
}

// TestBadProjectKeysAreUnauthenticated: an unknown id, a wrong secret, a
// malformed or oversized key token, and a key the index still holds but
// the database revoked or expired are UNAUTHENTICATED, never reaching the
// handler, and no answer carries the token.
func TestBadProjectKeysAreUnauthenticated(t *testing.T) {
	f := newKeyFixture(t)
	client := adminv1.NewTurnServiceClient(f.cc)
	name := TurnName.Format(uuid.NewString(), uuid.NewString())
	unknown, _, _, err := projects.NewKeyToken()
	must(t, err)
	wrong := f.token[:len(f.token)-43] + unknown.Reveal()[len(f.token)-43:]
	call := func(token string) error {
		_, err := client.GetTurn(as(f.ctx, token), &adminv1.GetTurnRequest{Name: name})
		return err
	}
	for _, token := range []string{
		unknown.Reveal(), wrong, f.token + "A", // an unknown id, a wrong secret, malformed
		projects.KeyPrefix + strings.Repeat("A", 10000), // oversized
	} {
		err := call(token)
		wantCode(t, err, codes.Unauthenticated, ReasonUnauthenticated)
		assertNoToken(t, err, f.token, token)
	}

	// Revoked in the database after the index loaded it: the tap's copy
	// passes it, the verification refuses it.
	_, err = f.st.RevokeProjectKey(f.ctx, f.project.ID, f.key.ID)
	must(t, err)
	wantCode(t, call(f.token), codes.Unauthenticated, ReasonUnauthenticated)
	if f.turns.count() != 0 {
		t.Fatal("a bad key reached the handler")
	}
}

// TestProjectKeyStreamEndsOnRevocation: a key's output stream ends
// UNAUTHENTICATED once the key is revoked, within a few verification
// periods; the administrator's stream is not watched.
func TestProjectKeyStreamEndsOnRevocation(t *testing.T) {
	f := newKeyFixture(t)
	client := adminv1.NewTurnServiceClient(f.cc)
	stream, err := client.StreamTurnOutput(as(f.ctx, f.token), &adminv1.StreamTurnOutputRequest{Name: TurnName.Format(uuid.NewString(), uuid.NewString())})
	must(t, err)
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	_, err = f.st.RevokeProjectKey(f.ctx, f.project.ID, f.key.ID)
	must(t, err)
	f.index.Load(f.ctx) //nolint:errcheck // the watch's Verify decides; the reload only mirrors the daemon
	revoked := time.Now()
	_, err = stream.Recv()
	wantCode(t, err, codes.Unauthenticated, ReasonUnauthenticated)
	if d := time.Since(revoked); d > 10*projects.VerifyCache {
		t.Fatalf("the stream ended %v after the revocation", d)
	}
}

// TestKeyMethodsAreExactlySessionTurnAndFileCalls: the methods a project
// key may call exist, are the Session and Turn calls of the tenants
// issue's list and the file and fork calls of issue 33 (agent builders
// hold keys),
// and nothing else; every other berth.admin.v1 method is the
// administrator's.
func TestKeyMethodsAreExactlySessionTurnAndFileCalls(t *testing.T) {
	want := []string{
		"/berth.admin.v1.SessionService/CreateSession", "/berth.admin.v1.SessionService/GetSession",
		"/berth.admin.v1.SessionService/ListSessions", "/berth.admin.v1.SessionService/DeleteSession",
		"/berth.admin.v1.SessionService/ForkSession",
		"/berth.admin.v1.TurnService/SubmitTurn", "/berth.admin.v1.TurnService/GetTurn",
		"/berth.admin.v1.TurnService/ListTurns", "/berth.admin.v1.TurnService/StreamTurnOutput",
		"/berth.admin.v1.TurnService/CancelTurn",
		"/berth.admin.v1.FileService/UploadFiles", "/berth.admin.v1.FileService/DownloadFiles",
	}
	if len(keyMethods) != len(want) {
		t.Fatalf("%d key methods, want %d", len(keyMethods), len(want))
	}
	for _, m := range want {
		if !keyMethods[m] {
			t.Errorf("%s is not a key method", m)
		}
	}
	all := map[string]bool{}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "berth.admin.v1" {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				all["/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	if len(all) < 20 {
		t.Fatalf("only %d berth.admin.v1 methods registered", len(all))
	}
	for m := range keyMethods {
		if !all[m] {
			t.Errorf("key method %s does not exist", m)
		}
	}
}
