package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// TestProjectLimitsUsageErrors: a limits command line without a limit or
// with a malformed one exits 2 before any connection is tried.
func TestProjectLimitsUsageErrors(t *testing.T) {
	const project = stubTenant + "/projects/00000000-0000-4000-8000-00000000000b"
	for _, args := range [][]string{
		{"project", "limits", project},
		{"project", "limits", "p", "--max-active", "3"},
		{"project", "limits", project, "--max-active", "-1"},
		{"project", "limits", project, "--max-retained", "many"},
		{"project", "create", "--tenant", "t", "app", "--max-active", "x"},
	} {
		code, out, errOut := runCmd(t, "", args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 with the reason", args, code, out, errOut)
		}
	}
}

// TestProjectLimitsCommandsSendTheirRequests: --max-active and
// --max-retained on create set the limits; `project limits` names in the
// mask exactly the limits given ("none" removes one); the project's
// limits and usage are shown.
func TestProjectLimitsCommandsSendTheirRequests(t *testing.T) {
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
	const requestID = "00000000-0000-4000-8000-0000000000cc"
	for _, tc := range []struct {
		args []string
		want proto.Message
		out  []string
	}{
		{[]string{"project", "create", "--tenant", tenantID, "app", "--request-id", requestID, "--max-active", "5"},
			&adminv1.CreateProjectRequest{Parent: stubTenant, RequestId: requestID, Project: &adminv1.Project{
				DisplayName: "app", Limits: &adminv1.ProjectLimits{MaxActiveSessions: proto.Int32(5)}}},
			[]string{"MAX ACTIVE:    none"}}, // the stub answers without limits
		{[]string{"project", "limits", project, "--max-retained", "0", "--etag", "3"},
			&adminv1.UpdateProjectRequest{Project: &adminv1.Project{Name: project, Limits: &adminv1.ProjectLimits{MaxRetainedSessions: proto.Int32(0)}},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"limits.max_retained_sessions"}}, Etag: "3"},
			[]string{"MAX ACTIVE:    none", "MAX RETAINED:  0", "HELD:          0"}},
		{[]string{"project", "limits", "--tenant", tenantID, "00000000-0000-4000-8000-00000000000b", "--max-active", "12", "--max-retained", "none"},
			&adminv1.UpdateProjectRequest{Project: &adminv1.Project{Name: project, Limits: &adminv1.ProjectLimits{MaxActiveSessions: proto.Int32(12)}},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"limits.max_active_sessions", "limits.max_retained_sessions"}}},
			[]string{"MAX ACTIVE:    12", "MAX RETAINED:  none"}},
	} {
		out := ctl(tc.args...)
		if got := stub.last(); !proto.Equal(got, tc.want) {
			t.Errorf("%q sent %v, want %v", tc.args, got, tc.want)
		}
		for _, line := range tc.out {
			if !strings.Contains(out, line) {
				t.Errorf("%q printed:\n%s\nwant a line with %q", tc.args, out, line)
			}
		}
	}
}
