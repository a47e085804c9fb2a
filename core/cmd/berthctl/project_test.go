package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// TestTenantAndProjectUsageErrors: a tenant or project command line that
// lacks what it needs exits 2 before any connection is tried.
func TestTenantAndProjectUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"tenant"},
		{"tenant", "bogus"},
		{"tenant", "create"},
		{"tenant", "get"},
		{"tenant", "update", "t"},
		{"tenant", "delete", "a", "b"},
		{"project"},
		{"project", "create", "app"},
		{"project", "list"},
		{"project", "get", "p"},
		{"project", "update", "--tenant", "t", "p"},
		{"project", "delete", "p"},
	} {
		code, out, errOut := runCmd(t, "", args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, "--help' for usage.") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 with the reason", args, code, out, errOut)
		}
	}
}

// projectStub is a ProjectService on a loopback port that records each
// request and answers with a resource named from it.
type projectStub struct {
	adminv1.UnimplementedProjectServiceServer
	mu  sync.Mutex
	got []proto.Message
}

func (s *projectStub) record(m proto.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m)
}

func (s *projectStub) last() proto.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[len(s.got)-1]
}

const stubTenant = "tenants/00000000-0000-4000-8000-00000000000a"

func (s *projectStub) CreateTenant(_ context.Context, r *adminv1.CreateTenantRequest) (*adminv1.CreateTenantResponse, error) {
	s.record(r)
	return &adminv1.CreateTenantResponse{Tenant: &adminv1.Tenant{Name: stubTenant, DisplayName: r.GetTenant().GetDisplayName(), Etag: "1"}}, nil
}

func (s *projectStub) ListTenants(_ context.Context, r *adminv1.ListTenantsRequest) (*adminv1.ListTenantsResponse, error) {
	s.record(r)
	return &adminv1.ListTenantsResponse{Tenants: []*adminv1.Tenant{{Name: stubTenant, DisplayName: "team", Etag: "4"}}}, nil
}

func (s *projectStub) UpdateTenant(_ context.Context, r *adminv1.UpdateTenantRequest) (*adminv1.UpdateTenantResponse, error) {
	s.record(r)
	return &adminv1.UpdateTenantResponse{Tenant: &adminv1.Tenant{Name: r.GetTenant().GetName(), DisplayName: r.GetTenant().GetDisplayName(), Etag: "2"}}, nil
}

func (s *projectStub) DeleteTenant(_ context.Context, r *adminv1.DeleteTenantRequest) (*adminv1.DeleteTenantResponse, error) {
	s.record(r)
	return &adminv1.DeleteTenantResponse{Tenant: &adminv1.Tenant{Name: r.GetName()}}, nil
}

func (s *projectStub) CreateProject(_ context.Context, r *adminv1.CreateProjectRequest) (*adminv1.CreateProjectResponse, error) {
	s.record(r)
	return &adminv1.CreateProjectResponse{Project: &adminv1.Project{Name: r.GetParent() + "/projects/p", DisplayName: r.GetProject().GetDisplayName(), Etag: "1"}}, nil
}

func (s *projectStub) GetProject(_ context.Context, r *adminv1.GetProjectRequest) (*adminv1.GetProjectResponse, error) {
	s.record(r)
	return &adminv1.GetProjectResponse{Project: &adminv1.Project{Name: r.GetName(), DisplayName: "app", Etag: "3"}}, nil
}

func (s *projectStub) ListProjects(_ context.Context, r *adminv1.ListProjectsRequest) (*adminv1.ListProjectsResponse, error) {
	s.record(r)
	return &adminv1.ListProjectsResponse{Projects: []*adminv1.Project{{Name: r.GetParent() + "/projects/p", DisplayName: "app", Etag: "3"}}}, nil
}

func (s *projectStub) UpdateProject(_ context.Context, r *adminv1.UpdateProjectRequest) (*adminv1.UpdateProjectResponse, error) {
	s.record(r)
	return &adminv1.UpdateProjectResponse{Project: r.GetProject()}, nil
}

func (s *projectStub) DeleteProject(_ context.Context, r *adminv1.DeleteProjectRequest) (*adminv1.DeleteProjectResponse, error) {
	s.record(r)
	return &adminv1.DeleteProjectResponse{Project: &adminv1.Project{Name: r.GetName()}}, nil
}

// TestTenantAndProjectCommandsSendTheirRequests: each command sends the
// request its arguments say (names completed from ids, --tenant as the
// parent, a fresh request id unless given, the rename's mask, the etag)
// and shows the answer as a table or, with -o json, as the message.
func TestTenantAndProjectCommandsSendTheirRequests(t *testing.T) {
	stub := &projectStub{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	adminv1.RegisterProjectServiceServer(srv, stub)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("berth-admin-v1.x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCmd(t, "", append(args, "--address", lis.Addr().String(), "--token-file", token)...)
		if code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errOut)
		}
		return out
	}
	const tenantID = "00000000-0000-4000-8000-00000000000a"
	const project = stubTenant + "/projects/00000000-0000-4000-8000-00000000000b"
	requestID := uuid.NewString()

	for _, tc := range []struct {
		args []string
		want proto.Message
		out  string
	}{
		{[]string{"tenant", "create", "team", "--request-id", requestID},
			&adminv1.CreateTenantRequest{RequestId: requestID, Tenant: &adminv1.Tenant{DisplayName: "team"}}, "NAME:          " + stubTenant},
		{[]string{"tenant", "list"}, &adminv1.ListTenantsRequest{PageSize: 1000}, stubTenant + "  team"},
		{[]string{"tenant", "update", tenantID, "--display-name", "crew", "--etag", "1"},
			&adminv1.UpdateTenantRequest{Tenant: &adminv1.Tenant{Name: stubTenant, DisplayName: "crew"}, UpdateMask: displayNameMask(), Etag: "1"}, "ETAG:          2"},
		{[]string{"tenant", "delete", stubTenant}, &adminv1.DeleteTenantRequest{Name: stubTenant}, "NAME:          " + stubTenant},
		{[]string{"project", "create", "--tenant", tenantID, "app", "--request-id", requestID},
			&adminv1.CreateProjectRequest{Parent: stubTenant, RequestId: requestID, Project: &adminv1.Project{DisplayName: "app"}}, "DISPLAY NAME:  app"},
		{[]string{"project", "list", "--tenant", stubTenant, "--page-size", "5"},
			&adminv1.ListProjectsRequest{Parent: stubTenant, PageSize: 5}, stubTenant + "/projects/p  app"},
		{[]string{"project", "get", "--tenant", tenantID, "00000000-0000-4000-8000-00000000000b"}, &adminv1.GetProjectRequest{Name: project}, "ETAG:          3"},
		{[]string{"project", "get", project}, &adminv1.GetProjectRequest{Name: project}, "NAME:          " + project},
		{[]string{"project", "update", project, "--display-name", "web", "--etag", "3"},
			&adminv1.UpdateProjectRequest{Project: &adminv1.Project{Name: project, DisplayName: "web"}, UpdateMask: displayNameMask(), Etag: "3"}, "DISPLAY NAME:  web"},
		{[]string{"project", "delete", "--tenant", tenantID, "00000000-0000-4000-8000-00000000000b", "--etag", "7"},
			&adminv1.DeleteProjectRequest{Name: project, Etag: "7"}, "NAME:          " + project},
	} {
		out := ctl(tc.args...)
		if got := stub.last(); !proto.Equal(got, tc.want) {
			t.Errorf("%q sent %v, want %v", tc.args, got, tc.want)
		}
		if !strings.Contains(out, tc.out) {
			t.Errorf("%q printed:\n%s\nwant a line with %q", tc.args, out, tc.out)
		}
	}

	// Without --request-id, a create sends a fresh UUID.
	ctl("tenant", "create", "team")
	if id := stub.last().(*adminv1.CreateTenantRequest).GetRequestId(); uuid.Validate(id) != nil || id == requestID {
		t.Errorf("request id %q", id)
	}
	if out := ctl("-o", "json", "project", "get", project); !strings.Contains(out, `"name": "`+project+`"`) || !strings.Contains(out, `"etag": "3"`) {
		t.Errorf("-o json printed %s", out)
	}
}
