package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"berth.dev/core/projects"
	"berth.dev/platform/errgrpc/errgrpctest"
	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"
)

// testInstallation is what the reader returns unless told otherwise.
var testInstallation = &adminv1.Installation{
	Name:                 "installation",
	Id:                   u1,
	PublicUrl:            "https://core.example:7443",
	OwnerEpoch:           7,
	CaFingerprint:        strings.Repeat("ab", 32),
	DeploymentGeneration: 3,
	CoreVersion:          "dev",
}

// reader is a test InstallationService that records the deadline of each
// call and returns err when set: the vehicle for the server's own rules
// (authentication, deadlines, error mapping), whatever the service.
type reader struct {
	adminv1.UnimplementedInstallationServiceServer
	mu        sync.Mutex
	calls     int
	deadlines []time.Duration // remaining at the call; -1 without one
	// principal is PrincipalFrom the last call's context.
	principal Principal
	err       error
}

func (r *reader) GetInstallation(ctx context.Context, req *adminv1.GetInstallationRequest) (*adminv1.GetInstallationResponse, error) {
	if _, err := ValidateName("name", req.GetName(), InstallationName); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.principal = PrincipalFrom(ctx)
	remaining := time.Duration(-1)
	if d, ok := ctx.Deadline(); ok {
		remaining = time.Until(d)
	}
	r.deadlines = append(r.deadlines, remaining)
	if r.err != nil {
		return nil, r.err
	}
	return &adminv1.GetInstallationResponse{Installation: testInstallation}, nil
}

// Register serves r as the InstallationService (admin.Service).
func (r *reader) Register(s *grpc.Server) { adminv1.RegisterInstallationServiceServer(s, r) }

func (r *reader) last() (int, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == 0 {
		return 0, 0
	}
	return r.calls, r.deadlines[len(r.deadlines)-1]
}

// TestHandlersSeeTheAdminPrincipal: a call with the admin token reaches
// its handler as the administrator, with the scope of every project, and
// nothing without a principal has a usable scope.
func TestHandlersSeeTheAdminPrincipal(t *testing.T) {
	r := &reader{}
	f := start(t, Options{}, r)
	ctx := testContext(t)
	if _, err := adminv1.NewInstallationServiceClient(f.cc).GetInstallation(f.authed(ctx), &adminv1.GetInstallationRequest{Name: InstallationName.Format()}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	p := r.principal
	r.mu.Unlock()
	if !p.Admin() || p.Actor() != "admin" || p.Scope() != projects.All() {
		t.Fatalf("handler saw principal %+v", p)
	}
	if none := PrincipalFrom(context.Background()); none.Admin() || none.Actor() != "" || none.Scope().Check() == nil {
		t.Fatalf("a context without a principal has %+v", none)
	}
}

// turns is a TurnService with only StreamTurnOutput, to exercise the
// registration hook, stream authentication and stream error mapping.
type turns struct {
	adminv1.UnimplementedTurnServiceServer
	err error
}

func (s *turns) StreamTurnOutput(req *adminv1.StreamTurnOutputRequest, stream grpc.ServerStreamingServer[adminv1.StreamTurnOutputResponse]) error {
	if err := stream.Send(&adminv1.StreamTurnOutputResponse{Stream: adminv1.OutputStream_OUTPUT_STREAM_STDOUT, Data: []byte("hi"), Offset: 0}); err != nil {
		return err
	}
	return s.err
}

// Register serves s as the TurnService (admin.Service).
func (s *turns) Register(g *grpc.Server) { adminv1.RegisterTurnServiceServer(g, s) }

type fixture struct {
	token string
	cc    *grpc.ClientConn
	read  *reader
}

func start(t *testing.T, opts Options, r *reader) fixture {
	t.Helper()
	token, digest, err := NewAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	opts.TokenDigest = digest
	if r != nil {
		opts.Services = append(opts.Services, r)
	}
	return fixture{token: token, cc: errgrpctest.Serve(t, NewServer(opts)), read: r}
}

// authed returns ctx carrying the admin token.
func (f fixture) authed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHealthNeedsNoToken(t *testing.T) {
	f := start(t, Options{}, &reader{})
	ctx := testContext(t)
	hc := healthpb.NewHealthClient(f.cc)
	for _, svc := range []string{"", "berth.admin.v1.InstallationService"} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, resp.GetStatus(), err)
		}
	}
	// A service that is not registered has no health entry.
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "berth.admin.v1.SessionService"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("health of an unregistered service: %v", err)
	}
}

// listServices lists the services through server reflection.
func listServices(ctx context.Context, cc *grpc.ClientConn) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	// The descriptors of the admin API must resolve too (what grpcurl
	// describe needs).
	for _, symbol := range []string{"berth.admin.v1.InstallationService", "berth.admin.v1.Turn"} {
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol},
		}); err != nil {
			return nil, err
		}
		resp, err = stream.Recv()
		if err != nil {
			return nil, err
		}
		if len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
			return nil, fmt.Errorf("no descriptor for %s: %v", symbol, resp.GetErrorResponse())
		}
	}
	_ = stream.CloseSend()
	slices.Sort(names)
	return names, nil
}

func TestReflectionNeedsNoToken(t *testing.T) {
	f := start(t, Options{Services: []Service{&turns{}}}, &reader{})
	ctx := testContext(t)

	names, err := listServices(ctx, f.cc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"berth.admin.v1.InstallationService",
		"berth.admin.v1.TurnService",
		"grpc.health.v1.Health",
		"grpc.reflection.v1.ServerReflection",
		"grpc.reflection.v1alpha.ServerReflection",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
}

func TestOnlyImplementedServicesAreRegistered(t *testing.T) {
	f := start(t, Options{}, nil)
	ctx := testContext(t)
	names, err := listServices(ctx, f.cc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}
	if !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	_, err = adminv1.NewInstallationServiceClient(f.cc).GetInstallation(f.authed(ctx), &adminv1.GetInstallationRequest{Name: "installation"})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetInstallation without a reader: %v", err)
	}
}

func TestUnauthenticatedCallsAreRefusedBeforeTheHandler(t *testing.T) {
	f := start(t, Options{}, &reader{})
	ctx := testContext(t)
	client := adminv1.NewInstallationServiceClient(f.cc)
	other, _, err := NewAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		ctx     context.Context
		message string
	}{
		"no token":    {ctx, msgMissingToken},
		"wrong token": {metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+other), msgInvalidToken},
		"no scheme":   {metadata.AppendToOutgoingContext(ctx, "authorization", f.token), msgInvalidToken},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := client.GetInstallation(tc.ctx, &adminv1.GetInstallationRequest{Name: "installation"})
			s, _, _ := decode(t, err)
			if s.Code() != codes.Unauthenticated || s.Message() != tc.message {
				t.Fatalf("got %v %q", s.Code(), s.Message())
			}
			assertNoToken(t, err, f.token, other)
		})
	}
	if calls, _ := f.read.last(); calls != 0 {
		t.Fatalf("the handler ran %d times for refused calls", calls)
	}
}

func TestUnregisteredMethodsAreUnimplementedOnlyAfterAuthentication(t *testing.T) {
	f := start(t, Options{}, &reader{})
	ctx := testContext(t)
	sessions := adminv1.NewSessionServiceClient(f.cc)

	_, err := sessions.GetSession(ctx, &adminv1.GetSessionRequest{Name: "sessions/" + u1})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v", err)
	}
	_, err = sessions.GetSession(f.authed(ctx), &adminv1.GetSessionRequest{Name: "sessions/" + u1})
	s, info, _ := decode(t, err)
	if s.Code() != codes.Unimplemented || s.Message() != "unknown method" || info.GetReason() != string(ReasonUnimplemented) {
		t.Fatalf("with a token: %v %q", s.Code(), s.Message())
	}
}

func TestDeadlinePolicy(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		f := start(t, Options{}, &reader{})
		client := adminv1.NewInstallationServiceClient(f.cc)
		if _, err := client.GetInstallation(f.authed(context.Background()), &adminv1.GetInstallationRequest{Name: "installation"}); err != nil {
			t.Fatal(err)
		}
		_, remaining := f.read.last()
		if remaining <= DefaultUnaryTimeout-10*time.Second || remaining > DefaultUnaryTimeout {
			t.Fatalf("a call without a deadline got %v, want the %v default", remaining, DefaultUnaryTimeout)
		}
	})
	t.Run("configured", func(t *testing.T) {
		f := start(t, Options{DefaultTimeout: time.Hour}, &reader{})
		client := adminv1.NewInstallationServiceClient(f.cc)
		if _, err := client.GetInstallation(f.authed(context.Background()), &adminv1.GetInstallationRequest{Name: "installation"}); err != nil {
			t.Fatal(err)
		}
		if _, remaining := f.read.last(); remaining <= 50*time.Minute || remaining > time.Hour {
			t.Fatalf("got %v, want the configured hour", remaining)
		}
	})
	t.Run("client deadline honoured", func(t *testing.T) {
		f := start(t, Options{DefaultTimeout: time.Hour}, &reader{})
		client := adminv1.NewInstallationServiceClient(f.cc)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := client.GetInstallation(f.authed(ctx), &adminv1.GetInstallationRequest{Name: "installation"}); err != nil {
			t.Fatal(err)
		}
		if _, remaining := f.read.last(); remaining <= 0 || remaining > 20*time.Second {
			t.Fatalf("got %v, want the client's 20s deadline", remaining)
		}
	})
}

func TestHandlerErrorsAreMapped(t *testing.T) {
	cases := []struct {
		name    string
		req     string
		err     error
		code    codes.Code
		message string
		field   string
	}{
		{"missing name", "", nil, codes.InvalidArgument, "invalid name: required", "name"},
		{"wrong name", "installations/x", nil, codes.InvalidArgument, "invalid name: must match installation", "name"},
		{"unavailable", "installation", fmt.Errorf("%s: %w", secretText, errdefs.ErrObservationUnavailable), codes.Unavailable, "observation unavailable", ""},
		{"not found", "installation", fmt.Errorf("%s: %w", secretText, errdefs.ErrNotFound), codes.NotFound, "not found", ""},
		{"unknown", "installation", errors.New(secretText), codes.Internal, "internal error", ""},
		{"foreign status", "installation", status.Error(codes.PermissionDenied, secretText), codes.Internal, "internal error", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, Options{}, &reader{err: tc.err})
			_, err := adminv1.NewInstallationServiceClient(f.cc).GetInstallation(f.authed(testContext(t)), &adminv1.GetInstallationRequest{Name: tc.req})
			s, _, br := decode(t, err)
			if s.Code() != tc.code || s.Message() != tc.message {
				t.Fatalf("got %v %q, want %v %q", s.Code(), s.Message(), tc.code, tc.message)
			}
			if tc.field != "" {
				if v := br.GetFieldViolations(); len(v) != 1 || v[0].GetField() != tc.field {
					t.Fatalf("violations %v", v)
				}
			}
			if strings.Contains(fmt.Sprint(s.Proto()), "hunter2") {
				t.Fatal("native text crossed")
			}
			assertNoToken(t, err, f.token)
		})
	}
}

func TestStreams(t *testing.T) {
	f := start(t, Options{Services: []Service{&turns{err: fmt.Errorf("%s: %w", secretText, errdefs.ErrCommandUnconfirmed)}}}, nil)
	ctx := testContext(t)
	client := adminv1.NewTurnServiceClient(f.cc)
	name := TurnName.Format(u1, u2)

	stream, err := client.StreamTurnOutput(ctx, &adminv1.StreamTurnOutputRequest{Name: name})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("stream without a token: %v", err)
	}

	stream, err = client.StreamTurnOutput(f.authed(ctx), &adminv1.StreamTurnOutputRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := stream.Recv()
	if err != nil || string(chunk.GetData()) != "hi" {
		t.Fatalf("first chunk: %v %v", chunk, err)
	}
	_, err = stream.Recv()
	s, info, _ := decode(t, err)
	if s.Code() != codes.Unknown || s.Message() != "command completion unconfirmed" || info.GetReason() != string(ReasonCommandUnconfirmed) {
		t.Fatalf("stream error %v %q", s.Code(), s.Message())
	}
	if strings.Contains(fmt.Sprint(s.Proto()), "hunter2") {
		t.Fatal("native text crossed")
	}
	// Its other methods give the generated UNIMPLEMENTED answer, in the
	// fixed form.
	_, err = client.GetTurn(f.authed(ctx), &adminv1.GetTurnRequest{Name: name})
	if s, _, _ := decode(t, err); s.Code() != codes.Unimplemented || s.Message() != "unknown method" {
		t.Fatalf("GetTurn: %v %q", s.Code(), s.Message())
	}
}
