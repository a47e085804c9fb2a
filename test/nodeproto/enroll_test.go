package nodeproto

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"berth.dev/platform/nodetls"

	"berth.dev/core/enrollment"
	"berth.dev/core/enrollmentgrpc"
	"berth.dev/core/nodes"
	"berth.dev/core/store/storetest"

	"berth.dev/test/internal/stack"
)

// core is the Core side of enrollment for these tests: the real store on
// PostgreSQL, the installation CA and the enrollment gRPC service over TLS.
type core struct {
	inst  *stack.Installation
	store *storetest.Store
	addr  string
}

// startEnrollment serves enrollment for inst. dropFirst makes the server
// perform the first enrollment and then lose its answer.
func startEnrollment(t *testing.T, inst *stack.Installation, dropFirst bool) *core {
	t.Helper()
	st := storetest.New(t)
	serverCert, err := inst.CA.IssueCoreServer(inst.ID, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := nodetls.EnrollmentServerConfig(serverCert, inst.CA.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	dropped := !dropFirst
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			if err == nil && !dropped {
				dropped = true
				return nil, status.Error(codes.Unavailable, "connection lost")
			}
			return resp, err
		}))
	enrollmentgrpc.New(enrollment.NewService(st, inst.CA, time.Now, uuid.New)).Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return &core{inst: inst, store: st, addr: lis.Addr().String()}
}

// issueToken creates a token the way Core's admin API will.
func (c *core) issueToken(t *testing.T, fingerprint string, ttl time.Duration) string {
	t.Helper()
	text, id, hash, _, err := nodetls.NewToken(fingerprint, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.store.CreateEnrollmentToken(context.Background(), id, hash, ttl); err != nil {
		t.Fatal(err)
	}
	return text
}

// enrollCmd runs `berth-nodeagent enroll` for a node prepared by
// prepareNode and returns its combined output and exit code.
func enrollCmd(t *testing.T, n *stack.Node, coreAddr, token string) (string, int) {
	t.Helper()
	return stack.EnrollCmd(t, n, coreAddr, token, "127.0.0.1:7443")
}

// startEnrolled checks that Core recorded exactly one node, the one the
// enroll output out names, then starts n under that identity and connects
// to it.
func (c *core) startEnrolled(t *testing.T, n *stack.Node, out string) *nodes.Proxy {
	t.Helper()
	recorded, _, err := c.store.ListNodes(context.Background(), 10, uuid.Nil)
	if err != nil || len(recorded) != 1 || !strings.Contains(out, recorded[0].ID.String()) {
		t.Fatalf("recorded nodes %+v (%v); enroll said %q", recorded, err, out)
	}
	n.ID = recorded[0].ID.String()
	n.Start()
	t.Cleanup(n.Stop)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	return proxy
}

func TestEnrollThenServe(t *testing.T) {
	inst := stack.NewInstallation(t)
	c := startEnrollment(t, inst, false)
	engine := stack.FixtureEngine(t)
	n := stack.PrepareNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage})
	out, code := enrollCmd(t, n, c.addr, c.issueToken(t, inst.CA.Fingerprint(), time.Hour))
	if code != 0 {
		t.Fatalf("enroll exited %d:\n%s", code, out)
	}
	fi, err := os.Stat(filepath.Join(n.Dir, "state", "identity.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v %v", fi, err)
	}
	if proxy := c.startEnrolled(t, n, out); proxy == nil {
		t.Fatal("no proxy")
	}
	// Enrolling a serving node is refused (its state directory is held),
	// and so is enrolling a stopped one twice.
	if out, code := enrollCmd(t, n, c.addr, c.issueToken(t, inst.CA.Fingerprint(), time.Hour)); code == 0 || !strings.Contains(out, "in use by another node agent") {
		t.Fatalf("enrolling a serving node: %d %s", code, out)
	}
	n.Stop()
	if out, code := enrollCmd(t, n, c.addr, c.issueToken(t, inst.CA.Fingerprint(), time.Hour)); code == 0 || !strings.Contains(out, "already enrolled") {
		t.Fatalf("second enrollment of the same node: %d %s", code, out)
	}
}

func TestEnrollmentRefusals(t *testing.T) {
	inst := stack.NewInstallation(t)
	c := startEnrollment(t, inst, false)
	engine := stack.FixtureEngine(t)
	used := c.issueToken(t, inst.CA.Fingerprint(), time.Hour)
	first := stack.PrepareNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage})
	if out, code := enrollCmd(t, first, c.addr, used); code != 0 {
		t.Fatalf("first enrollment: %s", out)
	}
	other := stack.NewInstallation(t)
	forgedCore := startEnrollment(t, other, false)
	cases := []struct {
		name, core, token, want string
	}{
		{"token reuse", c.addr, used, "rejected the token"},
		{"expired token", c.addr, c.issueToken(t, inst.CA.Fingerprint(), time.Microsecond), "rejected the token"},
		{"wrong CA fingerprint", c.addr, c.issueToken(t, other.CA.Fingerprint(), time.Hour), "does not chain to the CA the token pins"},
		{"forged Core", forgedCore.addr, c.issueToken(t, inst.CA.Fingerprint(), time.Hour), "does not chain to the CA the token pins"},
		{"not a token", c.addr, "hello", "not an enrollment token"},
	}
	for _, tc := range cases {
		n := stack.PrepareNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage})
		out, code := enrollCmd(t, n, tc.core, tc.token)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output %q; want a refusal saying %q", tc.name, code, out, tc.want)
		}
		if _, err := os.Stat(filepath.Join(n.Dir, "state", "identity.json")); err == nil {
			t.Errorf("%s: an identity was stored", tc.name)
		}
	}
	if nodes, _, _ := c.store.ListNodes(context.Background(), 10, uuid.Nil); len(nodes) != 1 {
		t.Errorf("refused enrollments recorded nodes: %d", len(nodes))
	}
}

func TestLostEnrollmentResponseIsRecoverable(t *testing.T) {
	inst := stack.NewInstallation(t)
	c := startEnrollment(t, inst, true)
	engine := stack.FixtureEngine(t)
	n := stack.PrepareNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage})
	token := c.issueToken(t, inst.CA.Fingerprint(), time.Hour)
	out, code := enrollCmd(t, n, c.addr, token)
	if code == 0 || !strings.Contains(out, "retry with the same token") {
		t.Fatalf("first attempt with a lost answer: %d %s", code, out)
	}
	out, code = enrollCmd(t, n, c.addr, token)
	if code != 0 {
		t.Fatalf("retry with the same token: %d %s", code, out)
	}
	c.startEnrolled(t, n, out)
}
