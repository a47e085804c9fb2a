package admin

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store"
)

// adminMethods walks the proto registry for every berth.admin.v1 method.
func adminMethods(t *testing.T) map[string]protoreflect.MethodDescriptor {
	t.Helper()
	out := map[string]protoreflect.MethodDescriptor{}
	protoregistry.GlobalFiles.RangeFilesByPackage("berth.admin.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				m := s.Methods().Get(j)
				out["/"+string(s.FullName())+"/"+string(m.Name())] = m
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatal("no berth.admin.v1 method in the registry")
	}
	return out
}

// TestMethodTableClassifiesEveryMethod: every berth.admin.v1 method of the
// proto registry is in the method table (mutating or not), and the table
// names no other; Get and List methods are reads; every action is one
// the audit trail accepts.
func TestMethodTableClassifiesEveryMethod(t *testing.T) {
	registered := adminMethods(t)
	names, mutating := Methods()
	for m := range registered {
		if _, ok := mutating[m]; !ok {
			t.Errorf("%s is not classified in the method table (methods.go): say whether it mutates", m)
		}
	}
	for _, m := range names {
		if _, ok := registered[m]; !ok {
			t.Errorf("the method table names %s, which berth.admin.v1 does not have", m)
		}
		short := m[strings.LastIndex(m, "/")+1:]
		if (strings.HasPrefix(short, "Get") || strings.HasPrefix(short, "List")) && mutating[m] {
			t.Errorf("%s reads but is classified as mutating", m)
		}
		if a := CallAction(m); !store.ValidAuditAction(a) {
			t.Errorf("%s: action %q is not a valid audit action", m, a)
		}
	}
	if CallAction("/berth.admin.v1.SessionService/CreateSession") != "call.session_service.create_session" {
		t.Fatalf("action %q", CallAction("/berth.admin.v1.SessionService/CreateSession"))
	}
	if CallAction("/x.Y/Z") != "call.unknown" {
		t.Fatal("an unknown method's action is the caller's text")
	}
}

// TestResourceOfRecordsOnlyNames: a request's name, parent or nested
// resource name is its resource only when it is a name of the admin
// API's patterns; anything else (a token pasted into a name) is nothing.
func TestResourceOfRecordsOnlyNames(t *testing.T) {
	session := SessionName.Format("6f1c3f5e-8a4b-4c2d-9e1f-0a1b2c3d4e5f")
	tenant := TenantName.Format("6f1c3f5e-8a4b-4c2d-9e1f-0a1b2c3d4e5f")
	for name, c := range map[string]struct {
		req  any
		want string
	}{
		"name":   {&adminv1.GetSessionRequest{Name: session}, session},
		"parent": {&adminv1.CreateProjectRequest{Parent: tenant}, tenant},
		"nested": {&adminv1.UpdateTenantRequest{Tenant: &adminv1.Tenant{Name: tenant}}, tenant},
		"secret": {&adminv1.GetSessionRequest{Name: "sessions/berth-admin-v1.c2VjcmV0"}, ""},
		"none":   {&adminv1.ListSessionsRequest{}, ""},
	} {
		if got := resourceOf(c.req); got != c.want {
			t.Errorf("%s: resource %q, want %q", name, got, c.want)
		}
	}
}
