package nodewire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// classSample is one error of each class as an adapter would return it,
// wrapped in native text.
type classSample struct {
	code  Code
	grpc  codes.Code
	class error
	err   func(op providercontract.Operation) error
}

func samples() []classSample {
	wrap := func(class error) func(providercontract.Operation) error {
		return func(providercontract.Operation) error {
			return fmt.Errorf("docker: container berth-abc on /var/run/docker.sock: %w", class)
		}
	}
	return []classSample{
		{CodeInvalid, codes.InvalidArgument, errdefs.ErrInvalid, wrap(errdefs.ErrInvalid)},
		{CodeOwnership, codes.FailedPrecondition, errdefs.ErrOwnership, wrap(errdefs.ErrOwnership)},
		{CodeExists, codes.AlreadyExists, errdefs.ErrExists, wrap(errdefs.ErrExists)},
		{CodeNotFound, codes.NotFound, errdefs.ErrNotFound, wrap(errdefs.ErrNotFound)},
		{CodeCommandUnconfirmed, codes.Unknown, errdefs.ErrCommandUnconfirmed, wrap(errdefs.ErrCommandUnconfirmed)},
		{CodeComputeUnconfirmed, codes.Unknown, errdefs.ErrComputeUnconfirmed, wrap(errdefs.ErrComputeUnconfirmed)},
		{CodeUnsupported, codes.Unimplemented, errdefs.ErrUnsupported, func(op providercontract.Operation) error {
			return fmt.Errorf("adapter: %w", &providercontract.UnsupportedError{Operation: op, Code: "no_native_checkpoint"})
		}},
		{CodeObservationUnavailable, codes.Unavailable, errdefs.ErrObservationUnavailable, wrap(errdefs.ErrObservationUnavailable)},
		{CodeRuntimeNotRunning, codes.FailedPrecondition, errdefs.ErrRuntimeNotRunning, wrap(errdefs.ErrRuntimeNotRunning)},
		{CodeProtocolMismatch, codes.FailedPrecondition, errdefs.ErrProtocolMismatch, wrap(errdefs.ErrProtocolMismatch)},
		{CodeFenced, codes.FailedPrecondition, errdefs.ErrFenced, wrap(errdefs.ErrFenced)},
	}
}

var allClasses = []error{
	errdefs.ErrInvalid, errdefs.ErrOwnership, errdefs.ErrExists, errdefs.ErrNotFound, errdefs.ErrComputeUnconfirmed,
	errdefs.ErrCommandUnconfirmed, errdefs.ErrUnsupported, errdefs.ErrObservationUnavailable,
	errdefs.ErrRuntimeNotRunning, errdefs.ErrProtocolMismatch, errdefs.ErrFenced, errdefs.ErrContract,
}

// onlyClass asserts err is of class want and of no other class.
func onlyClass(t *testing.T, err, want error) {
	t.Helper()
	for _, c := range allClasses {
		if got := errors.Is(err, c); got != (c == want) { //nolint:errorlint // c and want are entries of the class table: identity, not a returned error
			t.Fatalf("errors.Is(%v, %v) = %v", err, c, got)
		}
	}
}

// info reads the status's one ErrorInfo.
func errorInfo(t *testing.T, err error) (*status.Status, *errdetails.ErrorInfo) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v is no status", err)
	}
	var infos []*errdetails.ErrorInfo
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			infos = append(infos, ei)
		}
	}
	if len(infos) != 1 {
		t.Fatalf("%d ErrorInfos in %v", len(infos), st.Proto())
	}
	return st, infos[0]
}

func TestEveryClassRoundTrips(t *testing.T) {
	if got := len(Codes()); got != 11 {
		t.Fatalf("%d wire codes, want the 11 of DESIGN.md", got)
	}
	for _, op := range CarriedOperations() {
		for _, s := range samples() {
			if s.code == CodeUnsupported && requiredOps[op] {
				continue // TestRequiredOperationsAreNeverUnsupported
			}
			sent := ToStatusFor(op, s.err(op))
			st, info := errorInfo(t, sent)
			if st.Code() != s.grpc || info.GetReason() != string(s.code) || info.GetDomain() != pb.ErrorDomain {
				t.Fatalf("%s %s: status %v reason %q domain %q", op, s.code, st.Code(), info.GetReason(), info.GetDomain())
			}
			if g, ok := GRPCCode(s.code); !ok || g != s.grpc {
				t.Fatalf("GRPCCode(%s) = %v", s.code, g)
			}
			if r, _ := codec.Lookup(string(s.code)); st.Message() != r.Message || r.Message == "" {
				t.Fatalf("message %q is not the fixed one", st.Message())
			}
			got := FromError(op, sent)
			onlyClass(t, got, s.class)
			var e *Error
			if !errors.As(got, &e) || e.Code != s.code || e.Operation != op || e.GRPCCode != s.grpc {
				t.Fatalf("%s %s: %#v", op, s.code, got)
			}
			// ToStatus without an operation agrees for every known class.
			if a, b := status.Convert(ToStatus(s.err(op))).Proto(), st.Proto(); !proto.Equal(a, b) {
				t.Fatalf("ToStatus and ToStatusFor differ for %s", s.code)
			}
		}
	}
}

func TestUnknownErrorsMapPerOperationKind(t *testing.T) {
	foreign := status.Error(codes.NotFound, "rpc error from the vendor SDK: object /secret not found")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	unknowns := []error{
		errors.New("exec: permission denied"),
		fmt.Errorf("decode: %w", errdefs.ErrContract),
		&providercontract.ContractError{Code: providercontract.CodeBatchResult},
		fmt.Errorf("bare: %w", errdefs.ErrUnsupported),
		ctx.Err(),
		context.DeadlineExceeded,
		foreign,
		fmt.Errorf("wrapped: %w", foreign),
	}
	for _, op := range append(CarriedOperations(), "") {
		want, wantCode := errdefs.ErrComputeUnconfirmed, CodeComputeUnconfirmed
		if IsCommand(op) {
			want, wantCode = errdefs.ErrCommandUnconfirmed, CodeCommandUnconfirmed
		}
		for _, err := range unknowns {
			sent := ToStatusFor(op, err)
			st, info := errorInfo(t, sent)
			if info.GetReason() != string(wantCode) || st.Code() != codes.Unknown {
				t.Fatalf("%q %v: reason %q code %v", op, err, info.GetReason(), st.Code())
			}
			if op != "" {
				onlyClass(t, FromError(op, sent), want)
			}
		}
	}
	// An UnsupportedError for another operation, or with an unsafe reason or
	// operation, breaks the contract.
	for _, ue := range []*providercontract.UnsupportedError{
		{Operation: sandbox.OpSuspend, Code: "no_native_checkpoint"},
		{Operation: sandbox.OpRunCommand, Code: "Bad Reason /etc"},
		{Operation: "Teleport", Code: "no_native_checkpoint"},
	} {
		_, info := errorInfo(t, ToStatusFor(sandbox.OpRunCommand, ue))
		if info.GetReason() != string(CodeCommandUnconfirmed) || len(info.GetMetadata()) != 0 {
			t.Fatalf("%v crossed as %v", ue, info)
		}
	}
	if ToStatusFor(sandbox.OpCreate, nil) != nil || ToStatus(nil) != nil || CreateStatus(sandbox.Info{}, nil) != nil {
		t.Fatalf("nil error produced a status")
	}
}

func TestTransportFailuresAreUnknownOutcomes(t *testing.T) {
	ours := func(c codes.Code, reason string, md map[string]string, extra ...proto.Message) error {
		st := status.New(c, "whatever")
		ds := []any{&errdetails.ErrorInfo{Reason: reason, Domain: pb.ErrorDomain, Metadata: md}}
		for _, e := range extra {
			ds = append(ds, e)
		}
		return withDetails(t, st, ds...).Err()
	}
	transport := []struct {
		name string
		err  error
	}{
		{"unavailable", status.Error(codes.Unavailable, "connection refused 10.0.0.7:7443")},
		{"deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded")},
		{"canceled", status.Error(codes.Canceled, "context canceled")},
		{"unknown without detail", status.Error(codes.Unknown, "panic")},
		{"grpc unimplemented", status.Error(codes.Unimplemented, "unknown method Suspend")},
		{"not found without detail", status.Error(codes.NotFound, "no such container")},
		{"context canceled", context.Canceled},
		{"context deadline", fmt.Errorf("call: %w", context.DeadlineExceeded)},
		{"plain", errors.New("EOF")},
		{"foreign domain", withDetails(t, status.New(codes.NotFound, "x"),
			&errdetails.ErrorInfo{Reason: "not_found", Domain: "example.com"}).Err()},
		{"unknown reason", ours(codes.NotFound, "gone", nil)},
		{"code mismatch", ours(codes.Unavailable, "invalid", nil)},
		{"unexpected metadata", ours(codes.NotFound, "not_found", map[string]string{"path": "/secret"})},
		{"unsafe field", ours(codes.InvalidArgument, "invalid", map[string]string{"field": "../etc/passwd"})},
		{"unsupported without reason", ours(codes.Unimplemented, "unsupported", map[string]string{"operation": "Create"})},
		{"unsupported unknown op", ours(codes.Unimplemented, "unsupported", map[string]string{"operation": "Teleport", "reason": "no_way"})},
		{"two infos", withDetails(t, status.New(codes.NotFound, "x"),
			&errdetails.ErrorInfo{Reason: "not_found", Domain: pb.ErrorDomain},
			&errdetails.ErrorInfo{Reason: "not_found", Domain: pb.ErrorDomain}).Err()},
		{"foreign detail", ours(codes.NotFound, "not_found", nil, &errdetails.DebugInfo{Detail: "stack"})},
		{"malformed create failure", ours(codes.AlreadyExists, "exists", nil,
			&pb.CreateFailure{Info: &pb.Info{State: pb.State(77)}})},
	}
	for _, tc := range transport {
		for _, op := range CarriedOperations() {
			got := FromError(op, tc.err)
			onlyClass(t, got, UnknownOutcome(op))
			var e *Error
			if !errors.As(got, &e) || e.Code != "" {
				t.Fatalf("%s %s: %#v", tc.name, op, got)
			}
			for _, s := range []string{"10.0.0.7", "/secret", "passwd", "stack", "panic", "no such container"} {
				if strings.Contains(got.Error(), s) {
					t.Fatalf("%s: client error %q carries native text", tc.name, got)
				}
			}
		}
	}
	if FromError(sandbox.OpCreate, nil) != nil {
		t.Fatalf("nil error converted")
	}
	// Mutations, commands and reads get their own unknown outcome.
	u := status.Error(codes.Unavailable, "x")
	onlyClass(t, FromError(sandbox.OpRenew, u), errdefs.ErrComputeUnconfirmed)
	onlyClass(t, FromError(sandbox.OpDeleteSnapshot, u), errdefs.ErrComputeUnconfirmed)
	onlyClass(t, FromError(sandbox.OpRunCommandCompute, u), errdefs.ErrCommandUnconfirmed)
	onlyClass(t, FromError(sandbox.OpObserve, u), errdefs.ErrObservationUnavailable)
	onlyClass(t, FromError(sandbox.OpNewCompute, u), errdefs.ErrObservationUnavailable)
	onlyClass(t, FromError(sandbox.OpObserveBatch, u), errdefs.ErrComputeUnconfirmed)
}

func withDetails(t *testing.T, st *status.Status, ds ...any) *status.Status {
	t.Helper()
	p := st.Proto()
	for _, d := range ds {
		m, err := anyOf(d.(proto.Message))
		if err != nil {
			t.Fatal(err)
		}
		p.Details = append(p.Details, m)
	}
	return status.FromProto(p)
}

func TestUnsupportedKeepsOperationAndReason(t *testing.T) {
	for _, op := range CarriedOperations() {
		if requiredOps[op] {
			continue // TestRequiredOperationsAreNeverUnsupported
		}
		sent := ToStatusFor(op, &providercontract.UnsupportedError{Operation: op, Code: "no_native_checkpoint"})
		_, info := errorInfo(t, sent)
		want := map[string]string{MetadataOperation: string(op), MetadataReason: "no_native_checkpoint"}
		if !reflect.DeepEqual(info.GetMetadata(), want) {
			t.Fatalf("metadata %v", info.GetMetadata())
		}
		got := FromError(op, sent)
		ue, ok := providercontract.AsUnsupported(got, op)
		if !ok || ue.Code != "no_native_checkpoint" || !sandbox.IsUnsupportedOp(got, op) {
			t.Fatalf("%s: %v", op, got)
		}
		// The same answer read for another operation is a broken protocol.
		other := sandbox.OpGetInfo
		if op == other {
			other = sandbox.OpKill
		}
		onlyClass(t, FromError(other, sent), UnknownOutcome(other))
	}
}

func TestFieldErrorsKeepTheField(t *testing.T) {
	for _, field := range []string{"reference.tenant_id", "command.output_limit", "bootstrap", "compute.reference.allocation_id"} {
		sent := ToStatusFor(sandbox.OpCreate, fmt.Errorf("validate: %w", errdefs.Invalid(field, "secret-bearing reason hunter2")))
		_, info := errorInfo(t, sent)
		if info.GetMetadata()[MetadataField] != field || len(info.GetMetadata()) != 1 {
			t.Fatalf("metadata %v", info.GetMetadata())
		}
		got := FromError(sandbox.OpCreate, sent)
		if f, ok := errdefs.Field(got); !ok || f != field {
			t.Fatalf("field %q %v", f, ok)
		}
		onlyClass(t, got, errdefs.ErrInvalid)
		if strings.Contains(got.Error(), "hunter2") {
			t.Fatalf("reason crossed: %v", got)
		}
	}
	// A field of unsafe form is left off; the class still crosses.
	sent := ToStatusFor(sandbox.OpCreate, errdefs.Invalid("/home/alice/.ssh/id_rsa", "x"))
	_, info := errorInfo(t, sent)
	if len(info.GetMetadata()) != 0 {
		t.Fatalf("unsafe field sent: %v", info.GetMetadata())
	}
	got := FromError(sandbox.OpCreate, sent)
	if _, ok := errdefs.Field(got); ok {
		t.Fatalf("field invented")
	}
	onlyClass(t, got, errdefs.ErrInvalid)
}

func TestCreateFailureRoundTrips(t *testing.T) {
	g := newGen(11)
	ref := g.ref()
	info := sandbox.Info{Reference: ref, ProviderID: "c0ffee", State: sandbox.StateStopped, CreateSettled: true}
	sent := CreateStatus(info, fmt.Errorf("image mismatch: %w", errdefs.ErrComputeUnconfirmed))
	got, ok := CreateFailureInfo(sent)
	if !ok || !reflect.DeepEqual(got, info) {
		t.Fatalf("settlement lost: %+v %v", got, ok)
	}
	if err := got.CheckFor(ref); err != nil {
		t.Fatal(err)
	}
	onlyClass(t, FromError(sandbox.OpCreate, sent), errdefs.ErrComputeUnconfirmed)
	// It survives a second pass through ToStatusFor, once.
	again := ToStatusFor(sandbox.OpCreate, CreateStatus(info, sent))
	if n := len(status.Convert(again).Details()); n != 2 {
		t.Fatalf("%d details after a second pass", n)
	}
	if got, ok := CreateFailureInfo(again); !ok || got != info {
		t.Fatalf("settlement lost on a second pass")
	}
	// Zero or contract-breaking evidence is left off; the error still crosses.
	for _, i := range []sandbox.Info{{}, {Reference: ref, State: "weird"}} {
		sent := CreateStatus(i, errdefs.ErrExists)
		if _, ok := CreateFailureInfo(sent); ok {
			t.Fatalf("evidence %+v attached", i)
		}
		onlyClass(t, FromError(sandbox.OpCreate, sent), errdefs.ErrExists)
	}
	for _, err := range []error{nil, errors.New("x"), status.Error(codes.Unknown, "x")} {
		if _, ok := CreateFailureInfo(err); ok {
			t.Fatalf("CreateFailureInfo(%v) reported evidence", err)
		}
	}
}

func TestNativeTextNeverCrosses(t *testing.T) {
	secrets := []string{"hunter2", "/var/lib/berth/nodes/7/key.pem", "AKIAEXAMPLEKEY", "10.1.2.3", "berth-c0ffee"}
	joined := strings.Join(secrets, " ")
	errs := []error{
		errors.New(joined),
		fmt.Errorf("%s: %w", joined, errdefs.ErrNotFound),
		fmt.Errorf("%s: %w", joined, errdefs.ErrOwnership),
		fmt.Errorf("%s: %w", joined, errdefs.Invalid("reference.tenant_id", joined)),
		errdefs.Invalid(joined, "x"),
		fmt.Errorf("%s: %w", joined, &providercontract.UnsupportedError{Operation: sandbox.OpSuspend, Code: "no_native_checkpoint"}),
		&providercontract.UnsupportedError{Operation: sandbox.OpSuspend, Code: providercontract.ReasonCode(joined)},
		status.Error(codes.PermissionDenied, joined),
		withDetails(t, status.New(codes.Unknown, joined), &errdetails.ErrorInfo{
			Reason: "compute_unconfirmed", Domain: pb.ErrorDomain, Metadata: map[string]string{"x": joined},
		}).Err(),
		fmt.Errorf("%s: %w", joined, context.DeadlineExceeded),
	}
	for _, op := range []providercontract.Operation{"", sandbox.OpSuspend, sandbox.OpRunCommand} {
		for _, err := range errs {
			for _, sent := range []error{ToStatusFor(op, err), CreateStatus(sandbox.Info{}, err)} {
				raw, merr := proto.Marshal(status.Convert(sent).Proto())
				if merr != nil {
					t.Fatal(merr)
				}
				for _, s := range secrets {
					if bytes.Contains(raw, []byte(s)) {
						t.Fatalf("op %q: %q crossed in %v", op, s, status.Convert(sent).Proto())
					}
				}
				back := FromError(sandbox.OpSuspend, sent)
				for _, s := range secrets {
					if strings.Contains(back.Error(), s) {
						t.Fatalf("client error %q carries %q", back, s)
					}
				}
			}
		}
	}
}

func TestToStatusIsIdempotentAndPrecedence(t *testing.T) {
	for _, s := range samples() {
		once := ToStatusFor(sandbox.OpKill, s.err(sandbox.OpKill))
		for _, twice := range []error{ToStatusFor(sandbox.OpKill, once), ToStatus(fmt.Errorf("handler: %w", once))} {
			if !proto.Equal(status.Convert(once).Proto(), status.Convert(twice).Proto()) {
				t.Fatalf("%s: second conversion changed the status: %v", s.code, status.Convert(twice).Proto())
			}
		}
	}
	// An unsupported status for another operation does not pass through.
	sent := ToStatusFor(sandbox.OpSuspend, &providercontract.UnsupportedError{Operation: sandbox.OpSuspend, Code: "no_native_checkpoint"})
	_, info := errorInfo(t, ToStatusFor(sandbox.OpRunCommandCompute, sent))
	if info.GetReason() != string(CodeCommandUnconfirmed) {
		t.Fatalf("reason %q", info.GetReason())
	}
	// Unknown outcomes win over every rejection.
	for _, err := range []error{
		errors.Join(errdefs.ErrInvalid, errdefs.ErrComputeUnconfirmed),
		errors.Join(errdefs.Invalid("command.args", "x"), errdefs.ErrCommandUnconfirmed),
		errors.Join(errdefs.ErrNotFound, errdefs.ErrComputeUnconfirmed),
	} {
		_, info := errorInfo(t, ToStatusFor(sandbox.OpRunCommand, err))
		if !strings.HasSuffix(info.GetReason(), "_unconfirmed") {
			t.Fatalf("%v crossed as %q", err, info.GetReason())
		}
	}
	_, info = errorInfo(t, ToStatus(errors.Join(errdefs.ErrNotFound, errdefs.ErrFenced)))
	if info.GetReason() != string(CodeFenced) {
		t.Fatalf("fenced lost to not_found: %q", info.GetReason())
	}
}

// nodeServer answers Create, GetInfo and RunCommand with the error its
// test sets; every other RPC is gRPC's own Unimplemented.
type nodeServer struct {
	pb.UnimplementedNodeServiceServer
	err  error
	info sandbox.Info
}

func (s *nodeServer) Create(context.Context, *pb.CreateRequest) (*pb.CreateResponse, error) {
	return nil, CreateStatus(s.info, s.err)
}

func (s *nodeServer) GetInfo(context.Context, *pb.GetInfoRequest) (*pb.GetInfoResponse, error) {
	return nil, ToStatusFor(sandbox.OpGetInfo, s.err)
}

func (s *nodeServer) RunCommand(context.Context, *pb.RunCommandRequest) (*pb.RunCommandResponse, error) {
	return nil, ToStatusFor(sandbox.OpRunCommand, s.err)
}

func TestStatusesSurviveRealGRPC(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	node := &nodeServer{}
	pb.RegisterNodeServiceServer(srv, node)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := pb.NewNodeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	g := newGen(12)
	ref := g.ref()
	node.info = sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true}
	node.err = fmt.Errorf("volume berth-x exists: %w", errdefs.ErrExists)
	_, err = client.Create(ctx, &pb.CreateRequest{})
	onlyClass(t, FromError(sandbox.OpCreate, err), errdefs.ErrExists)
	if got, ok := CreateFailureInfo(err); !ok || !got.IsAbsenceReceipt(ref) {
		t.Fatalf("settlement lost over gRPC: %+v %v", got, ok)
	}

	node.err = errdefs.Invalid("reference.tenant_id", "must be a canonical lowercase UUID")
	_, err = client.GetInfo(ctx, &pb.GetInfoRequest{})
	if f, ok := errdefs.Field(FromError(sandbox.OpGetInfo, err)); !ok || f != "reference.tenant_id" {
		t.Fatalf("field lost over gRPC: %v", err)
	}

	node.err = errors.New("exec session lost")
	_, err = client.RunCommand(ctx, &pb.RunCommandRequest{})
	onlyClass(t, FromError(sandbox.OpRunCommand, err), errdefs.ErrCommandUnconfirmed)

	// gRPC's own Unimplemented is not the protocol's unsupported.
	_, err = client.Suspend(ctx, &pb.SuspendRequest{})
	onlyClass(t, FromError(sandbox.OpSuspend, err), errdefs.ErrComputeUnconfirmed)

	// A call that cannot reach the node is an unknown outcome.
	srv.Stop()
	_, err = client.Kill(ctx, &pb.KillRequest{})
	onlyClass(t, FromError(sandbox.OpKill, err), errdefs.ErrComputeUnconfirmed)
	_, err = client.GetInfo(ctx, &pb.GetInfoRequest{})
	onlyClass(t, FromError(sandbox.OpGetInfo, err), errdefs.ErrObservationUnavailable)
}

func anyOf(m proto.Message) (*anypb.Any, error) { return anypb.New(m) }

// TestRequiredOperationsAreNeverUnsupported: the five required operations
// can never return UnsupportedError. A node agent whose adapter answers so
// sends the operation's unknown outcome; a Core that reads an unsupported
// answer for one of them gets a contract violation (ErrContract), never
// UnsupportedError.
func TestRequiredOperationsAreNeverUnsupported(t *testing.T) {
	req := []providercontract.Operation{sandbox.OpCreate, sandbox.OpGetInfo, sandbox.OpRenew, sandbox.OpKill, sandbox.OpRunCommand}
	if len(requiredOps) != len(req) {
		t.Fatalf("required operations %v, want %v", requiredOps, req)
	}
	unsupported, _ := codec.Lookup(string(CodeUnsupported))
	for _, op := range req {
		if !requiredOps[op] {
			t.Fatalf("%s is not required", op)
		}
		sent := ToStatusFor(op, &providercontract.UnsupportedError{Operation: op, Code: "no_native_thing"})
		if _, info := errorInfo(t, sent); Code(info.GetReason()) != unknownCode(op) {
			t.Fatalf("%s: node sent %q, want %q", op, info.GetReason(), unknownCode(op))
		}
		// A (broken) node that sends unsupported anyway.
		wire := codec.Build(unsupported, map[string]string{MetadataOperation: string(op), MetadataReason: "no_native_thing"}).Err()
		got := FromError(op, wire)
		if _, ok := providercontract.AsUnsupported(got, op); ok || errdefs.IsUnsupported(got) {
			t.Fatalf("%s: Core read an UnsupportedError: %v", op, got)
		}
		onlyClass(t, got, errdefs.ErrContract)
	}
}

func unknownCode(op providercontract.Operation) Code {
	if IsCommand(op) {
		return CodeCommandUnconfirmed
	}
	return CodeComputeUnconfirmed
}
