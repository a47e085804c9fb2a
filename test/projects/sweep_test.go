package projects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// sweptServices are the services whose every method a key is tried on
// with another project's names; the rest of berth.admin.v1 is tried too
// (adminServices), for its refusal.
var sweptServices = []protoreflect.FullName{
	"berth.admin.v1.SessionService", "berth.admin.v1.TurnService", "berth.admin.v1.AllocationService",
	"berth.admin.v1.FileService",
}

// keyAllowed are the methods a project key may call (issue 31, item 2,
// and issue 33's files and fork):
// every other berth.admin.v1 method must refuse a key
// PERMISSION_DENIED project_key_method_denied. A method added to Core's
// allow-list and not here fails the sweep, and so does one added here
// and not there.
var keyAllowed = map[string]bool{
	"/berth.admin.v1.SessionService/CreateSession": true,
	"/berth.admin.v1.SessionService/GetSession":    true,
	"/berth.admin.v1.SessionService/ListSessions":  true,
	"/berth.admin.v1.SessionService/DeleteSession": true,
	"/berth.admin.v1.SessionService/ForkSession":   true,
	"/berth.admin.v1.TurnService/SubmitTurn":       true,
	"/berth.admin.v1.TurnService/GetTurn":          true,
	"/berth.admin.v1.TurnService/ListTurns":        true,
	"/berth.admin.v1.TurnService/StreamTurnOutput": true,
	"/berth.admin.v1.TurnService/CancelTurn":       true,
	"/berth.admin.v1.FileService/UploadFiles":      true,
	"/berth.admin.v1.FileService/DownloadFiles":    true,
}

// listsEmpty are the allowed methods whose answer to another project's
// names is an empty list rather than NOT_FOUND (ListSessions' project is
// a filter: a project the caller cannot see lists nothing, as one that
// does not exist).
var listsEmpty = map[string]bool{"/berth.admin.v1.SessionService/ListSessions": true}

// names are the resource names and request ids a request is filled with.
type names struct {
	session, turn, allocation, project string
	sessionRequest, turnRequest        string
}

// randomNames are names of nothing: fresh uuids in every position.
func randomNames() names {
	s := "sessions/" + uuid.NewString()
	return names{
		session: s, turn: s + "/turns/" + uuid.NewString(), allocation: "allocations/" + uuid.NewString(),
		project:        "tenants/" + uuid.NewString() + "/projects/" + uuid.NewString(),
		sessionRequest: uuid.NewString(), turnRequest: uuid.NewString(),
	}
}

// adminServices lists every service of the berth.admin.v1 package from
// the registered file descriptors.
func adminServices(t *testing.T) []protoreflect.ServiceDescriptor {
	t.Helper()
	var out []protoreflect.ServiceDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("berth.admin.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			out = append(out, f.Services().Get(i))
		}
		return true
	})
	for _, want := range sweptServices {
		found := false
		for _, s := range out {
			found = found || s.FullName() == want
		}
		if !found {
			t.Fatalf("%s is not registered", want)
		}
	}
	return out
}

// fullMethod is a method's gRPC path.
func fullMethod(m protoreflect.MethodDescriptor) string {
	return fmt.Sprintf("/%s/%s", m.Parent().FullName(), m.Name())
}

// request builds m's request filled from n: a name or parent of the
// method's resource kind, a request id the other project used, the
// project, and the smallest valid Session or Turn body, so that nothing
// but the names can decide the answer.
func request(t *testing.T, m protoreflect.MethodDescriptor, n names) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
	if err != nil {
		t.Fatalf("%s: %v", fullMethod(m), err)
	}
	msg := mt.New()
	service := m.Parent().Name()
	name, request := "", ""
	switch service {
	case "SessionService":
		name, request = n.session, n.sessionRequest
	case "TurnService":
		name, request = n.turn, n.turnRequest
	case "AllocationService":
		name = n.allocation
	case "FileService":
		name, request = n.session, n.sessionRequest
		if m.Name() == "UploadFiles" {
			// The smallest valid upload's first message: one raw byte.
			return &adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Header{Header: &adminv1.UploadHeader{
				Name: name, RequestId: request, Path: "probe", Format: adminv1.FileFormat_FILE_FORMAT_RAW, Size: 1}}}
		}
	}
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch {
		case f.Kind() == protoreflect.StringKind && f.Name() == "name" && name != "":
			msg.Set(f, protoreflect.ValueOfString(name))
		case f.Kind() == protoreflect.StringKind && f.Name() == "parent" && service == "TurnService":
			msg.Set(f, protoreflect.ValueOfString(n.session))
		case f.Kind() == protoreflect.StringKind && f.Name() == "request_id" && request != "":
			msg.Set(f, protoreflect.ValueOfString(request))
		case f.Kind() == protoreflect.StringKind && f.Name() == "project":
			msg.Set(f, protoreflect.ValueOfString(n.project))
		case f.Kind() == protoreflect.MessageKind && f.Message().FullName() == "berth.admin.v1.Session":
			msg.Set(f, protoreflect.ValueOfMessage((&adminv1.Session{Project: n.project}).ProtoReflect()))
		case f.Kind() == protoreflect.MessageKind && f.Message().FullName() == "berth.admin.v1.Turn":
			msg.Set(f, protoreflect.ValueOfMessage(shell("echo probe").ProtoReflect()))
		case f.Kind() == protoreflect.Int32Kind && f.Name() == "count":
			msg.Set(f, protoreflect.ValueOfInt32(1)) // ForkSession's smallest valid count
		case f.Kind() == protoreflect.EnumKind && f.Enum().FullName() == "berth.admin.v1.FileFormat":
			msg.Set(f, protoreflect.ValueOfEnum(protoreflect.EnumNumber(adminv1.FileFormat_FILE_FORMAT_TAR)))
		}
	}
	return msg.Interface()
}

// answer is what a call came back with: its status (OK included) and,
// for a successful list, how many items it held.
type answer struct {
	status *status.Status
	items  int
}

func (a answer) String() string {
	return fmt.Sprintf("%v %q %v (items %d)", a.status.Code(), a.status.Message(), a.status.Details(), a.items)
}

// call invokes m with req on ctx's credentials: a unary call, a client
// stream given req as its only message, or a server stream read to its
// first answer.
func call(ctx context.Context, t *testing.T, cc *grpc.ClientConn, m protoreflect.MethodDescriptor, req proto.Message) answer {
	t.Helper()
	out, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		t.Fatal(err)
	}
	reply := out.New().Interface()
	switch {
	case m.IsStreamingClient():
		// Its first message, then the end of the client's side.
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, fullMethod(m))
		if err == nil {
			err = st.SendMsg(req)
		}
		if err == nil {
			err = st.CloseSend()
		}
		if err == nil {
			err = st.RecvMsg(reply)
		}
		return answer{status: status.Convert(err)}
	case m.IsStreamingServer():
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, fullMethod(m))
		if err == nil {
			err = st.SendMsg(req)
		}
		if err == nil {
			err = st.CloseSend()
		}
		if err == nil {
			err = st.RecvMsg(reply)
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return answer{status: status.Convert(err)}
	default:
		err = cc.Invoke(ctx, fullMethod(m), req, reply)
	}
	a := answer{status: status.Convert(err)}
	if err == nil {
		if l, ok := reply.(*adminv1.ListSessionsResponse); ok {
			a.items = len(l.GetSessions())
		}
	}
	return a
}

// variant is one pair of names a sweep tries each method with: theirs
// (another project's) and none (names of nothing). turnsOnly limits it to
// the methods that name a Turn.
type variant struct {
	label        string
	theirs, none names
	turnsOnly    bool
}

// namesTurn reports whether m's request names a Turn.
func namesTurn(m protoreflect.MethodDescriptor) bool {
	return m.Parent().Name() == "TurnService" && m.Input().Fields().ByName("name") != nil
}

// sweep calls every method of every berth.admin.v1 service with key ctx,
// for each variant once with its other project's names and once with
// names of nothing, and checks each answer is its method's refusal and
// identical for both. It returns how many calls it made per outcome.
func sweep(t *testing.T, ctx context.Context, cc *grpc.ClientConn, variants []variant) map[string]int {
	t.Helper()
	outcomes := map[string]int{}
	seen := map[string]bool{}
	defer func() {
		for method := range keyAllowed {
			if !seen[method] {
				t.Errorf("%s is allowed to keys but not registered", method)
			}
		}
	}()
	for _, s := range adminServices(t) {
		methods := s.Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			method := fullMethod(m)
			seen[method] = true
			for _, v := range variants {
				if v.turnsOnly && !namesTurn(m) {
					continue
				}
				variant := v.label
				got := call(ctx, t, cc, m, request(t, m, v.theirs))
				none := call(ctx, t, cc, m, request(t, m, v.none))
				outcomes[got.status.Code().String()+" "+stack.AdminReason(got.status.Err())]++
				if !proto.Equal(got.status.Proto(), none.status.Proto()) || got.items != none.items {
					t.Errorf("%s with %s: %v; with names of nothing: %v", method, variant, got, none)
				}
				switch {
				case listsEmpty[method]:
					if got.status.Code() != codes.OK || got.items != 0 {
						t.Errorf("%s with %s: %v, want OK and an empty list", method, variant, got)
					}
				case keyAllowed[method]:
					if got.status.Code() != codes.NotFound || stack.AdminReason(got.status.Err()) != "not_found" {
						t.Errorf("%s with %s: %v, want NOT_FOUND not_found", method, variant, got)
					}
				default:
					if got.status.Code() != codes.PermissionDenied || stack.AdminReason(got.status.Err()) != "project_key_method_denied" {
						t.Errorf("%s with %s: %v, want PERMISSION_DENIED project_key_method_denied", method, variant, got)
					}
				}
			}
		}
	}
	return outcomes
}
