package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// auditStub is an AuditService on a loopback port that records each
// request and answers one event.
type auditStub struct {
	adminv1.UnimplementedAuditServiceServer
	mu  sync.Mutex
	got []*adminv1.ListAuditEventsRequest
}

func (s *auditStub) ListAuditEvents(_ context.Context, r *adminv1.ListAuditEventsRequest) (*adminv1.ListAuditEventsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, proto.Clone(r).(*adminv1.ListAuditEventsRequest))
	return &adminv1.ListAuditEventsResponse{AuditEvents: []*adminv1.AuditEvent{{
		Actor: "admin", Action: "call.session_service.create_session", Resource: "sessions/s", Outcome: "ok", RequestId: "r-1",
	}}}, nil
}

func (s *auditStub) last() *adminv1.ListAuditEventsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[len(s.got)-1]
}

// TestAuditListSendsItsFilters: audit list sends the filters its flags
// say (a key's name becomes its actor, a project id with --tenant its
// name, --since a start time, --until an end time, none by default so the
// server's now - 5 s applies) and prints the events; bad flags exit 2.
func TestAuditListSendsItsFilters(t *testing.T) {
	stub := &auditStub{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	adminv1.RegisterAuditServiceServer(srv, stub)
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
	const project = stubTenant + "/projects/00000000-0000-4000-8000-00000000000b"
	const keyID = "00000000-0000-4000-8000-00000000000c"

	out := ctl("audit", "list")
	if got := stub.last(); !proto.Equal(got, &adminv1.ListAuditEventsRequest{PageSize: 1000}) {
		t.Fatalf("audit list sent %v", got)
	}
	if !strings.Contains(out, "admin") || !strings.Contains(out, "call.session_service.create_session") || !strings.Contains(out, "sessions/s") {
		t.Fatalf("audit list printed:\n%s", out)
	}
	before := time.Now()
	ctl("audit", "list", "--since", "1h", "--until", "0s", "--project", "00000000-0000-4000-8000-00000000000b", "--tenant", "00000000-0000-4000-8000-00000000000a",
		"--actor", project+"/keys/"+keyID, "--action", "session.", "--resource", "sessions/s", "--outcome", "ok", "--page-size", "7")
	got := stub.last()
	if got.GetProject() != project || got.GetActor() != "key:"+keyID || got.GetActionPrefix() != "session." ||
		got.GetResource() != "sessions/s" || got.GetOutcome() != "ok" || got.GetPageSize() != 7 {
		t.Fatalf("audit list sent %v", got)
	}
	if start := got.GetStartTime().AsTime(); start.Before(before.Add(-time.Hour)) || start.After(time.Now().Add(-time.Hour)) {
		t.Fatalf("--since 1h sent start %v", start)
	}
	if end := got.GetEndTime().AsTime(); end.Before(before) {
		t.Fatalf("--until 0s sent end %v", end)
	}
	ctl("audit", "list", "--actor", "admin")
	if got := stub.last().GetActor(); got != "admin" {
		t.Fatalf("--actor admin sent %q", got)
	}
	if out := ctl("-o", "json", "audit", "list"); !strings.Contains(out, `"action": "call.session_service.create_session"`) {
		t.Fatalf("-o json printed %s", out)
	}
	for _, args := range [][]string{
		{"audit"},
		{"audit", "list", "extra"},
		{"audit", "list", "--project", "p"},
		{"audit", "list", "--since", "-1h"},
	} {
		code, _, errOut := runCmd(t, "", append(args, "--address", lis.Addr().String(), "--token-file", token)...)
		if code != 2 || !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("%q: exit %d, stderr %q; want 2", args, code, errOut)
		}
	}
}
