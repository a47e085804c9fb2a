package hostile

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store/storetest"

	"berth.dev/test/internal/stack"
)

// The admin API's error domain and the field of a malformed body.
const (
	adminDomain    = "admin.berth.dev"
	malformedField = "request"
)

// wantStatus fails unless err is code with the admin API's ErrorInfo of
// reason (and, when field is set, naming field), and returns the status.
func wantStatus(t *testing.T, what string, err error, code codes.Code, reason, field string) {
	t.Helper()
	s := status.Convert(err)
	var info *errdetails.ErrorInfo
	for _, d := range s.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok && i.GetDomain() == adminDomain {
			info = i
		}
	}
	if s.Code() != code || info == nil || info.GetReason() != reason || (field != "" && info.GetMetadata()["field"] != field) {
		t.Fatalf("%s: %v %q %v; want %v reason %s field %q", what, s.Code(), s.Message(), info, code, reason, field)
	}
	if strings.Contains(s.Message(), "grpc:") || strings.Contains(s.Message(), "proto:") {
		t.Fatalf("%s: native text crossed: %q", what, s.Message())
	}
}

// TestHostileAdminInput drives a real berth-core's admin API as a hostile
// client: unauthenticated oversized, nested and malformed bodies are
// UNAUTHENTICATED (refused from the headers, before the body is read).
// Then, for each credential (the administrator's token and a project
// key), with a well-formed token Core does not know the same bodies are
// UNAUTHENTICATED; with the credential, malformed bodies are
// INVALID_ARGUMENT on "request" and a Struct past the depth bound
// INVALID_ARGUMENT on its field, or, for a method the credential may not
// call, PERMISSION_DENIED project_key_method_denied from the headers;
// header blocks past the bound end the connection without an answer; a
// display name with a bidi override is refused. The credential is served
// throughout.
func TestHostileAdminInput(t *testing.T) {
	core := stack.StartCore(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true)
	cc, authed := core.AdminClient(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", core.Logs())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	authed, cancelAuthed := context.WithTimeout(authed, 2*time.Minute)
	defer cancelAuthed()
	big, err := grpc.NewClient(core.AdminAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()

	nested := nestedPreview(3900<<10, 3000)
	oversized := appendBytesField(nil, 1, []byte(strings.Repeat("x", 8<<20)))
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff\xfe")
	deep := nestedPreview(0, 60)       // about 180 message levels: past the decoder's limit
	tooDeepStruct := structPreview(33) // one object past the Struct depth bound

	// Without a token every body is refused from the headers alone.
	valid := mustMarshal(t, &adminv1.GetInstallationRequest{Name: "installation"})
	for name, b := range map[string]struct {
		method string
		body   []byte
	}{
		"3.9 MB nested Structs":  {previewMethod, nested},
		"8 MB body":              {getInstallationMethod, oversized},
		"truncated":              {getInstallationMethod, valid[:len(valid)-2]},
		"invalid UTF-8":          {getInstallationMethod, badUTF8},
		"nesting past the limit": {previewMethod, deep},
	} {
		wantStatus(t, "unauthenticated "+name, invokeRaw(ctx, big, b.method, b.body), codes.Unauthenticated, "unauthenticated", "")
	}

	for _, cr := range []credential{adminCredential(t, cc, authed), keyCredential(t, cc, authed)} {
		t.Run(cr.name, func(t *testing.T) {
			wrong := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+cr.unknown)
			wantStatus(t, "well-formed unknown token, nested", invokeRaw(wrong, big, previewMethod, nested), codes.Unauthenticated, "unauthenticated", "")
			wantStatus(t, "well-formed unknown token, 8 MB", invokeRaw(wrong, big, cr.read, oversized), codes.Unauthenticated, "unauthenticated", "")

			// With the credential, malformed bodies are the caller's
			// mistake, where it may call the method at all.
			readValid := mustMarshal(t, cr.readRequest)
			for _, b := range []struct {
				name, method string
				body         []byte
				field        string
			}{
				{"truncated", cr.read, readValid[:len(readValid)-2], malformedField},
				{"invalid UTF-8", cr.read, badUTF8, malformedField},
				{"nesting past the limit", previewMethod, deep, malformedField},
				{"3.9 MB nested Structs", previewMethod, nested, malformedField},
				{"Struct past the depth bound", previewMethod, tooDeepStruct, "candidate.configuration"},
			} {
				code, reason, field := codes.InvalidArgument, "invalid", b.field
				if !cr.may(b.method) {
					code, reason, field = codes.PermissionDenied, "project_key_method_denied", ""
				}
				wantStatus(t, "authenticated "+b.name, invokeRaw(cr.ctx, big, b.method, b.body), code, reason, field)
			}

			// Header blocks past the bound: a grpc-go client will not send
			// one (the server announced its limit)...
			if err := cr.served(cr.ctx); err != nil {
				t.Fatal(err)
			}
			padded := metadata.AppendToOutgoingContext(cr.ctx, "x-pad", strings.Repeat("x", 32<<10))
			if err := cr.served(padded); status.Code(err) != codes.Internal {
				t.Fatalf("32 KiB of headers through grpc-go: %v, want the client's own refusal", err)
			}
			// ...and one sent anyway is never answered: grpc-go's HPACK
			// decoder refuses a value longer than the bound before
			// buffering it, and a list past it made of small headers is
			// cut off there; either way the call's body is never read and
			// no status is sent (what ends the call on the wire, a closed
			// connection or a reset stream, is grpc-go's choice: this
			// server ends the connection).
			for _, tc := range []struct {
				name  string
				block []byte
			}{
				{"15 MB authorization", hugeHeaders(core.AdminAddr(), cr.read, cr.prefix, 15<<20)},
				{"32 KiB authorization", hugeHeaders(core.AdminAddr(), cr.read, cr.prefix, 32<<10)},
				{"32 headers of 1 KiB", paddedHeaders(core.AdminAddr(), cr.read, 32)},
			} {
				got, err := sendHeaders(ctx, core.AdminAddr(), tc.block)
				if err != nil || strings.HasPrefix(got, "status") {
					t.Fatalf("%s: %q %v, want the call ended unanswered", tc.name, got, err)
				}
				t.Logf("%s: %s", tc.name, got)
			}
			// A block under the bound without a valid token is answered
			// UNAUTHENTICATED.
			if got, err := sendHeaders(ctx, core.AdminAddr(), hugeHeaders(core.AdminAddr(), cr.read, cr.prefix, 8<<10)); err != nil || got != "status 16" {
				t.Fatalf("8 KiB header block without a valid token: %q %v, want status 16", got, err)
			}

			// A display name that reorders what a table shows is refused.
			_, err = adminv1.NewSessionServiceClient(cc).CreateSession(cr.ctx, &adminv1.CreateSessionRequest{
				RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: "invoice\u202Efdp.exe"},
			})
			wantStatus(t, "bidi override in display_name", err, codes.InvalidArgument, "invalid", "session.display_name")
			_, err = adminv1.NewSessionServiceClient(cc).CreateSession(cr.ctx, &adminv1.CreateSessionRequest{
				RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: "a\u200Db"},
			})
			wantStatus(t, "zero-width joiner in display_name", err, codes.InvalidArgument, "invalid", "session.display_name")

			// The credential is still served.
			if err := cr.served(cr.ctx); err != nil {
				t.Fatalf("call with the credential after the attacks: %v", err)
			}
		})
	}

	// The operator is still served, and so is a tokenless health probe.
	api := adminv1.NewInstallationServiceClient(cc)
	if _, err := api.GetInstallation(authed, &adminv1.GetInstallationRequest{Name: "installation"}); err != nil {
		t.Fatalf("authenticated call after the attacks: %v", err)
	}
	if resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", resp, err)
	}
	if strings.Contains(core.Logs(), "berth-key-v1.") {
		t.Fatal("Core's log holds a key token")
	}
}

// structPreview is a PreviewDeploymentRequest whose configuration nests
// depth objects ({"a": {"a": ... {}}}).
func structPreview(depth int) []byte {
	cand := appendBytesField(nil, fieldNumber(&adminv1.DeploymentCandidate{}, "provider_kind"), []byte("docker"))
	cand = appendBytesField(cand, fieldNumber(&adminv1.DeploymentCandidate{}, "configuration"), nestedStruct(depth-1))
	return appendBytesField(nil, fieldNumber(&adminv1.PreviewDeploymentRequest{}, "candidate"), cand)
}

// TestConcurrentIdenticalSubmitTurns: for each credential (the
// administrator's token and a project key), fifty identical SubmitTurn
// calls at once (one request id, one body) through a real Core all succeed
// with the same Turn, and the Session holds exactly one; another body
// under the request id is refused.
func TestConcurrentIdenticalSubmitTurns(t *testing.T) {
	c := stack.OneNodeCluster(t, stack.DefaultSpecification(), stack.CoreOptions{}, stack.NodeOptions{})
	sessionsAPI := adminv1.NewSessionServiceClient(c.CC)
	turnsAPI := adminv1.NewTurnServiceClient(c.CC)
	for _, cr := range []credential{adminCredential(t, c.CC, c.Ctx), keyCredential(t, c.CC, c.Ctx)} {
		t.Run(cr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(cr.ctx, 2*time.Minute)
			defer cancel()
			sess, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
			if err != nil {
				t.Fatal(err)
			}
			req := &adminv1.SubmitTurnRequest{
				Parent: sess.GetSession().GetName(), RequestId: uuid.NewString(),
				Turn: &adminv1.Turn{
					Command: &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: []string{"true"}}}},
					Timeout: durationpb.New(time.Minute), QueueTimeout: durationpb.New(time.Minute),
				},
			}
			const callers = 50
			names := make([]string, callers)
			errs := make([]error, callers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					<-start
					resp, err := turnsAPI.SubmitTurn(ctx, req)
					names[i], errs[i] = resp.GetTurn().GetName(), err
				})
			}
			close(start)
			wg.Wait()
			for i := range callers {
				if errs[i] != nil {
					t.Fatalf("caller %d: %v (reason %q)", i, errs[i], stack.AdminReason(errs[i]))
				}
				if names[i] != names[0] {
					t.Fatalf("caller %d got %s, caller 0 %s", i, names[i], names[0])
				}
			}
			list, err := turnsAPI.ListTurns(ctx, &adminv1.ListTurnsRequest{Parent: sess.GetSession().GetName()})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.GetTurns()) != 1 || list.GetTurns()[0].GetName() != names[0] {
				t.Fatalf("the Session holds %d Turns, want the one", len(list.GetTurns()))
			}
			other := proto.Clone(req).(*adminv1.SubmitTurnRequest)
			other.Turn.Command = &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: []string{"false"}}}}
			_, err = turnsAPI.SubmitTurn(ctx, other)
			wantStatus(t, "same request id, other body", err, codes.AlreadyExists, "exists", "")
		})
	}
}
