package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"berth.dev/platform/errgrpc/errgrpctest"
	adminv1 "berth.dev/proto/berth/admin/v1"
)

// The methods the tests call with hand-made bodies.
const (
	getInstallation = "/berth.admin.v1.InstallationService/GetInstallation"
	preview         = "/berth.admin.v1.DeploymentService/PreviewDeployment"
	streamOutput    = "/berth.admin.v1.TurnService/StreamTurnOutput"
)

// deployments is a DeploymentService whose PreviewDeployment only runs the
// admin package's own validation of a candidate's objects.
type deployments struct {
	adminv1.UnimplementedDeploymentServiceServer
}

// Register serves d as the DeploymentService (admin.Service).
func (d deployments) Register(s *grpc.Server) { adminv1.RegisterDeploymentServiceServer(s, d) }

func (deployments) PreviewDeployment(_ context.Context, req *adminv1.PreviewDeploymentRequest) (*adminv1.PreviewDeploymentResponse, error) {
	if err := ValidateStruct("candidate.configuration", req.GetCandidate().GetConfiguration()); err != nil {
		return nil, err
	}
	if err := ValidateStruct("candidate.credential", req.GetCandidate().GetCredential()); err != nil {
		return nil, err
	}
	return &adminv1.PreviewDeploymentResponse{}, nil
}

// nestedObjects is a google.protobuf.Struct in wire form depth objects deep
// ({"a": {"a": ... {}}}, the innermost object empty): three message
// levels per object.
func nestedObjects(depth int) []byte {
	var inner []byte
	for range depth - 1 {
		value := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), inner) // Value.struct_value
		entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("a"))
		entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), value)
		inner = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry) // Struct.fields
	}
	return inner
}

// previewWith is a PreviewDeploymentRequest in wire form whose candidate's
// configuration is the Struct cfg (in wire form).
func previewWith(cfg []byte) []byte {
	cand := protowire.AppendTag(nil, fieldNum(&adminv1.DeploymentCandidate{}, "configuration"), protowire.BytesType)
	cand = protowire.AppendBytes(cand, cfg)
	req := protowire.AppendTag(nil, fieldNum(&adminv1.PreviewDeploymentRequest{}, "candidate"), protowire.BytesType)
	return protowire.AppendBytes(req, cand)
}

func fieldNum(m proto.Message, name string) protowire.Number {
	fd := m.ProtoReflect().Descriptor().Fields().ByTextName(name)
	return fd.Number()
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantMalformed fails unless err is the admin API's refusal of a malformed
// body: INVALID_ARGUMENT, reason invalid, field "request", the fixed
// message and nothing of grpc-go's or the parser's text.
func wantMalformed(t *testing.T, err error) {
	t.Helper()
	s, info, br := decode(t, err)
	if s.Code() != codes.InvalidArgument || info.GetReason() != string(ReasonInvalid) || info.GetDomain() != ErrorDomain ||
		info.GetMetadata()[MetadataField] != "request" || br == nil {
		t.Fatalf("got %v %q %v", s.Code(), s.Message(), info)
	}
	if want := "invalid request: not a well-formed protobuf message of the method's request type"; s.Message() != want {
		t.Fatalf("message %q, want %q", s.Message(), want)
	}
}

// TestMalformedBodiesAreInvalidArgument: a body that does not decode
// (truncated wire data, invalid UTF-8 in a string, nesting past
// MaxMessageDepth) is INVALID_ARGUMENT with the admin API's ErrorInfo,
// unary and streaming, and never reaches a handler; without a token the
// same bodies are UNAUTHENTICATED, because authentication comes first.
func TestMalformedBodiesAreInvalidArgument(t *testing.T) {
	r := &reader{}
	f := start(t, Options{Services: []Service{deployments{}, &turns{}}}, r)
	ctx := testContext(t)
	valid := mustMarshal(t, &adminv1.GetInstallationRequest{Name: "installation"})
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff\xfe")
	cases := []struct {
		name, method string
		body         []byte
	}{
		{"truncated", getInstallation, valid[:len(valid)-3]},
		{"length past the end", getInstallation, []byte{0x0a, 0x7f, 'x'}},
		{"invalid UTF-8", getInstallation, badUTF8},
		{"bad tag", getInstallation, []byte{0x00}},
		{"nesting past MaxMessageDepth", preview, previewWith(nestedObjects(MaxMessageDepth/3 + 1))},
		{"stream truncated", streamOutput, []byte{0x0a, 0x10, 'x'}},
		{"stream invalid UTF-8", streamOutput, badUTF8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := errgrpctest.Invoke
			if tc.method == streamOutput {
				call = errgrpctest.ServerStream
			}
			wantMalformed(t, call(f.authed(ctx), f.cc, tc.method, tc.body))
			s, info, _ := decode(t, call(ctx, f.cc, tc.method, tc.body))
			if s.Code() != codes.Unauthenticated || info.GetReason() != string(ReasonUnauthenticated) {
				t.Fatalf("without a token: %v %q", s.Code(), info.GetReason())
			}
		})
	}
	if calls, _ := r.last(); calls != 0 {
		t.Fatalf("a handler ran %d times for malformed bodies", calls)
	}
	// A well-formed call on the same connection is served.
	if err := errgrpctest.Invoke(f.authed(ctx), f.cc, getInstallation, valid); err != nil {
		t.Fatal(err)
	}
}

// TestStructDepthBound: a candidate's configuration nested deeper than
// MaxStructDepth but within MaxMessageDepth decodes and is refused by
// validation on its field; at the bound it is accepted.
func TestStructDepthBound(t *testing.T) {
	f := start(t, Options{Services: []Service{deployments{}}}, nil)
	ctx := f.authed(testContext(t))
	if MaxMessageDepth < 3*MaxStructDepth+3 {
		t.Fatalf("MaxMessageDepth %d cannot decode a Struct MaxStructDepth (%d) deep", MaxMessageDepth, MaxStructDepth)
	}
	err := errgrpctest.Invoke(ctx, f.cc, preview, previewWith(nestedObjects(MaxStructDepth+1)))
	s, info, _ := decode(t, err)
	if s.Code() != codes.InvalidArgument || info.GetMetadata()[MetadataField] != "candidate.configuration" {
		t.Fatalf("one past the bound: %v %q %v", s.Code(), s.Message(), info)
	}
	if err := errgrpctest.Invoke(ctx, f.cc, preview, previewWith(nestedObjects(MaxStructDepth))); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
}

// TestValidateStruct covers objects, lists and their mixture at and past
// MaxStructDepth.
func TestValidateStruct(t *testing.T) {
	nest := func(depth int, list func(int) bool) *structpb.Struct {
		v := structpb.NewNumberValue(1)
		for i := depth - 1; i >= 1; i-- {
			if list(i) {
				v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNullValue(), v}})
			} else {
				v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"k": v, "s": structpb.NewStringValue("x")}})
			}
		}
		return &structpb.Struct{Fields: map[string]*structpb.Value{"a": v}}
	}
	shapes := map[string]func(int) bool{
		"objects": func(int) bool { return false },
		"lists":   func(int) bool { return true },
		"mixed":   func(i int) bool { return i%2 == 0 },
	}
	for name, shape := range shapes {
		if err := ValidateStruct("f", nest(MaxStructDepth, shape)); err != nil {
			t.Errorf("%s at the bound: %v", name, err)
		}
		err := ValidateStruct("f", nest(MaxStructDepth+1, shape))
		if fe, ok := fieldOf(err); !ok || fe != "f" {
			t.Errorf("%s past the bound: %v", name, err)
		}
	}
	if err := ValidateStruct("f", nil); err != nil {
		t.Errorf("absent object: %v", err)
	}
}

func fieldOf(err error) (string, bool) {
	s, ok := status.FromError(ToStatus(err))
	if !ok || s.Code() != codes.InvalidArgument {
		return "", false
	}
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetMetadata()[MetadataField], true
		}
	}
	return "", false
}

// TestUnauthenticatedBodyIsNeverRead: a call without a token is refused
// from its headers alone. Its body is larger than MaxRecvMsgBytes, so had
// the server read it first the answer would be RESOURCE_EXHAUSTED; an
// authenticated one of that size is.
func TestUnauthenticatedBodyIsNeverRead(t *testing.T) {
	r := &reader{}
	f := start(t, Options{}, r)
	ctx := testContext(t)
	big := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), strings.Repeat("x", MaxRecvMsgBytes+1))
	opt := grpc.MaxCallSendMsgSize(2 * MaxRecvMsgBytes)
	var reply errgrpctest.Raw
	err := f.cc.Invoke(ctx, getInstallation, errgrpctest.Raw(big), &reply, grpc.ForceCodec(errgrpctest.Codec{}), opt)
	s, info, _ := decode(t, err)
	if s.Code() != codes.Unauthenticated || info.GetReason() != string(ReasonUnauthenticated) || s.Message() != msgMissingToken {
		t.Fatalf("without a token: %v %q %v", s.Code(), s.Message(), info)
	}
	err = f.cc.Invoke(f.authed(ctx), getInstallation, errgrpctest.Raw(big), &reply, grpc.ForceCodec(errgrpctest.Codec{}), opt)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("authenticated, past MaxRecvMsgBytes: %v", err)
	}
	if calls, _ := r.last(); calls != 0 {
		t.Fatalf("the handler ran %d times", calls)
	}
}

// TestHeaderListBound: the server announces MaxHeaderListBytes, so a
// grpc-go client refuses to send a larger header block (the black-box
// test in test/hostile sends one anyway); a call under it is served.
func TestHeaderListBound(t *testing.T) {
	r := &reader{}
	f := start(t, Options{}, r)
	ctx := f.authed(testContext(t))
	client := adminv1.NewInstallationServiceClient(f.cc)
	// The first call learns the server's settings.
	if _, err := client.GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"}); err != nil {
		t.Fatal(err)
	}
	big := metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("x", MaxHeaderListBytes))
	if _, err := client.GetInstallation(big, &adminv1.GetInstallationRequest{Name: "installation"}); err == nil {
		t.Fatal("a header block past MaxHeaderListBytes was served")
	}
	if calls, _ := r.last(); calls != 1 {
		t.Fatalf("the handler ran %d times, want 1", calls)
	}
}

// FuzzAdminServerDecoding sends arbitrary bytes as the body of a unary and
// a streaming admin method to a real admin server with the token: every
// answer is success or a status of the admin API's form (its ErrorInfo, a
// fixed code other than INTERNAL), never grpc-go's or the parser's text,
// and the server keeps serving. The seeds (valid, truncated, invalid
// UTF-8, nested past either bound) run as a normal test. grpc-go's
// goroutines make coverage vary between runs of one input, so the engine
// spends much of a coverage-guided run minimizing (-fuzzminimizetime
// bounds that).
func FuzzAdminServerDecoding(f *testing.F) {
	token, digest, err := NewAdminToken()
	if err != nil {
		f.Fatal(err)
	}
	cc := errgrpctest.Serve(f, NewServer(Options{TokenDigest: digest, Services: []Service{&reader{}, deployments{}, &turns{}}}))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)

	valid := mustMarshal(f, &adminv1.GetInstallationRequest{Name: "installation"})
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0xff, 0xfe})
	f.Add(previewWith(nestedObjects(MaxStructDepth)))
	f.Add(previewWith(nestedObjects(MaxStructDepth + 1)))
	f.Add(previewWith(nestedObjects(MaxMessageDepth)))
	f.Add(mustMarshal(f, &adminv1.StreamTurnOutputRequest{Name: "sessions/x/turns/y"}))
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		check := func(method string, err error) {
			if err == nil {
				return
			}
			s, ok := status.FromError(err)
			if !ok {
				t.Fatalf("%s: not a status: %v", method, err)
			}
			var info *errdetails.ErrorInfo
			for _, d := range s.Details() {
				if i, ok := d.(*errdetails.ErrorInfo); ok {
					info = i
				}
			}
			if info == nil || info.GetDomain() != ErrorDomain || s.Code() == codes.Internal || s.Code() == codes.Unknown {
				t.Fatalf("%s: %v %q without the admin API's form", method, s.Code(), s.Message())
			}
			if strings.Contains(s.Message(), "grpc:") || strings.Contains(s.Message(), "proto:") {
				t.Fatalf("%s: native text crossed: %q", method, s.Message())
			}
		}
		for _, m := range []string{getInstallation, preview} {
			check(m, errgrpctest.Invoke(ctx, cc, m, body))
		}
		check(streamOutput, errgrpctest.ServerStream(ctx, cc, streamOutput, body))
		if err := errgrpctest.Invoke(ctx, cc, getInstallation, valid); err != nil {
			t.Fatalf("the server stopped serving: %v", err)
		}
	})
}
