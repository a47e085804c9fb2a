package runtime

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	runtimev1 "berth.dev/proto/berth/runtime/v1"

	"berth.dev/test/internal/stack"
)

// TestSessionRunsTurns is issue #6's end-to-end path over the real
// binaries and engine: a Session's Runtime connects back to Core, Turns
// run in order with byte-exact output and exit codes, the workspace
// persists between Turns, a Turn past its timeout is killed and reported,
// a running Turn is cancelled, and the Runtime survives a node agent
// restart and reconnects after a Core restart.
func TestSessionRunsTurns(t *testing.T) {
	e := newEnv(t)
	session := e.createSession()
	s := e.waitAdmitted(session)
	if env := s.GetEnvironment(); !env.GetComputeAvailable() || !env.GetRuntimeConnected() || !env.GetCapabilitiesPrepared() {
		t.Fatalf("environment %v", env)
	}

	// Output, stdin and exit code, byte for byte.
	stdin := []byte("line one\n\x00\xffbinary\n")
	turn := shell("cat; printf 'to stderr\\n' >&2; printf \"$GREETING\"; exit 3")
	turn.Stdin = stdin
	turn.Env = map[string]string{"GREETING": "hi there"}
	r := e.run(session, turn)
	if r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || r.turn.GetExitCode() != 3 ||
		!bytes.Equal(r.stdout, append(append([]byte{}, stdin...), "hi there"...)) || string(r.stderr) != "to stderr\n" {
		t.Fatalf("turn: %v", r)
	}
	if r.turn.GetStdoutBytes() != int64(len(r.stdout)) || r.turn.GetOutputTruncated() || r.turn.GetStartTime() == nil || r.turn.GetEndTime() == nil {
		t.Fatalf("turn record %v", r.turn)
	}

	// The documented first Turn of `make up`, then persistence across
	// Turns, with an argv command.
	r = e.run(session, shell("uname -s; id -u; echo hello > /workspace/f; cat /workspace/f"))
	if r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || r.turn.GetExitCode() != 0 || string(r.stdout) != "Linux\n1000\nhello\n" {
		t.Fatalf("make-up turn: %v", r)
	}
	r = e.run(session, &adminv1.Turn{Command: &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: []string{"cat", "f"}}}}})
	if r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "hello\n" {
		t.Fatalf("argv turn in /workspace: %v", r)
	}

	// A Turn that outlives its timeout is killed and reported.
	slow := shell("echo started; sleep 60; echo never")
	slow.Timeout = durationpb.New(2 * time.Second)
	start := time.Now()
	r = e.run(session, slow)
	if r.turn.GetState() != adminv1.Turn_STATE_TIMED_OUT || string(r.stdout) != "started\n" {
		t.Fatalf("timed out turn: %v", r)
	}
	t.Logf("timeout 2s reported after %v", time.Since(start).Round(time.Millisecond))

	// Cancellation kills a running Turn.
	name := e.startLongTurn(session)
	if _, err := e.turns.CancelTurn(e.ctx, &adminv1.CancelTurnRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	r = e.wait(name)
	if r.turn.GetState() != adminv1.Turn_STATE_CANCELLED || r.turn.GetCancelTime() == nil {
		t.Fatalf("cancelled turn: %v", r)
	}

	// A node agent restart does not touch the connected Runtime.
	e.node.Stop()
	e.node.Start()
	r = e.run(session, shell("cat /workspace/f"))
	if r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "hello\n" {
		t.Fatalf("turn after node agent restart: %v", r)
	}

	// Core restarts while the Session is idle: the Runtime reconnects (a
	// new connection generation) and the next Turn runs.
	e.restartCore()
	e.waitAdmitted(session)
	r = e.run(session, shell("echo after restart; cat /workspace/f"))
	if r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "after restart\nhello\n" {
		t.Fatalf("turn after Core restart: %v", r)
	}

	// Every Turn is listed once, in submission order.
	list, err := e.turns.ListTurns(e.ctx, &adminv1.ListTurnsRequest{Parent: session, PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	var all []*adminv1.Turn
	for {
		all = append(all, list.GetTurns()...)
		if list.GetNextPageToken() == "" {
			break
		}
		list, err = e.turns.ListTurns(e.ctx, &adminv1.ListTurnsRequest{Parent: session, PageSize: 3, PageToken: list.GetNextPageToken()})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(all) != 7 || all[len(all)-1].GetName() != r.turn.GetName() {
		t.Fatalf("listed %d turns", len(all))
	}
	// The largest page (and any larger page_size, read as the largest)
	// lists them all at once.
	for _, size := range []int32{1000, 5000} {
		list, err = e.turns.ListTurns(e.ctx, &adminv1.ListTurnsRequest{Parent: session, PageSize: size})
		if err != nil || len(list.GetTurns()) != 7 || list.GetNextPageToken() != "" {
			t.Fatalf("page_size %d: %d turns, next %q, %v", size, len(list.GetTurns()), list.GetNextPageToken(), err)
		}
	}

	// Deletion: the Runtime is revoked, everything is removed.
	if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: session}); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, 2*time.Minute, "cleanup", func() bool {
		c, v := stack.Owned(t, e.docker, e.installationID)
		return c == 0 && v == 0
	})
	if _, err := e.turns.SubmitTurn(e.ctx, &adminv1.SubmitTurnRequest{Parent: session, RequestId: uuid.NewString(), Turn: shell("true")}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("SubmitTurn to a deleted Session: %v, want FAILED_PRECONDITION", err)
	}
}

// TestTurnQueuedBeforeRuntimeRunsWhenItConnects submits a Turn in the
// same breath as the Session: it waits for the Runtime and then runs.
func TestTurnQueuedBeforeRuntimeRunsWhenItConnects(t *testing.T) {
	e := newEnv(t)
	resp, err := e.sessions.CreateSession(e.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		t.Fatal(err)
	}
	session := resp.GetSession().GetName()
	if resp.GetSession().GetEnvironment().GetRuntimeConnected() {
		t.Fatal("runtime connected before the container could exist")
	}
	r := e.run(session, shell("echo queued first"))
	if r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "queued first\n" {
		t.Fatalf("turn: %v", r)
	}
}

// TestGatewayRefusesWrongCredentials dials the Runtime gateway the way a
// Runtime does: an unknown device, a known device with a wrong
// credential, and a wrong protocol version are refused with their fixed
// reasons, and none of them receives a Turn.
func TestGatewayRefusesWrongCredentials(t *testing.T) {
	e := newEnv(t)
	session := e.createSession()
	// A queued Turn that no impostor may receive.
	if _, err := e.turns.SubmitTurn(e.ctx, &adminv1.SubmitTurnRequest{Parent: session, RequestId: uuid.NewString(), Turn: shell("sleep 5")}); err != nil {
		t.Fatal(err)
	}
	alloc, err := adminv1.NewAllocationServiceClient(e.cc).ListAllocations(e.ctx, &adminv1.ListAllocationsRequest{})
	if err != nil || len(alloc.GetAllocations()) != 1 {
		t.Fatalf("allocations: %v %v", alloc, err)
	}
	device := e.deviceID(t)

	cc, err := grpc.NewClient(e.gateway, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	gw := runtimev1.NewRuntimeGatewayServiceClient(cc)
	for _, tc := range []struct {
		name   string
		hello  *runtimev1.Hello
		code   codes.Code
		reason string
	}{
		{"unknown device", &runtimev1.Hello{ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: uuid.NewString(), Credential: strings.Repeat("a", 43)}, codes.Unauthenticated, runtimev1.ReasonCredentialRejected},
		{"wrong credential", &runtimev1.Hello{ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: device, Credential: strings.Repeat("b", 43)}, codes.Unauthenticated, runtimev1.ReasonCredentialRejected},
		{"malformed device", &runtimev1.Hello{ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: "x", Credential: "c"}, codes.Unauthenticated, runtimev1.ReasonCredentialRejected},
		{"protocol", &runtimev1.Hello{ProtocolVersion: "berth.runtime.v1/0", DeviceId: device, Credential: strings.Repeat("b", 43)}, codes.FailedPrecondition, runtimev1.ReasonProtocolMismatch},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := gw.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Hello{Hello: tc.hello}}); err != nil {
			t.Fatal(err)
		}
		m, err := st.Recv()
		cancel()
		if m != nil {
			t.Fatalf("%s: received %v", tc.name, m)
		}
		if status.Code(err) != tc.code || reason(err) != tc.reason {
			t.Errorf("%s: %v, want %v %s", tc.name, err, tc.code, tc.reason)
		}
		if strings.Contains(err.Error(), device) {
			t.Errorf("%s: the error names the device", tc.name)
		}
	}
	// The real Runtime still gets the Turn.
	list, err := e.turns.ListTurns(e.ctx, &adminv1.ListTurnsRequest{Parent: session})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.wait(list.GetTurns()[0].GetName()); r.turn.GetState() != adminv1.Turn_STATE_COMPLETED {
		t.Fatalf("turn: %v", r)
	}
}

// deviceID reads the only allocation's device id from the database (the
// admin API does not expose it).
func (e *env) deviceID(t testing.TB) string {
	t.Helper()
	var id string
	if err := e.core.Store(t).Pool().QueryRow(context.Background(), "SELECT device_id::text FROM allocations").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == runtimev1.ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}

// TestTurnsOverTLSFromTheInstallationCA: with an https public URL and no
// certificate of the operator's, Core serves the Runtime gateway over TLS
// with a certificate from the installation CA, the adapter places that CA
// beside the bootstrap file, and the Runtime trusts it: the Session's
// Runtime connects (a plaintext client is refused by the gateway) and a
// Turn runs with its exact output.
func TestTurnsOverTLSFromTheInstallationCA(t *testing.T) {
	e := newEnvWith(t, &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4}, 1, true)
	session := e.createSession()
	r := e.run(session, shell("printf 'over tls\\n'"))
	if r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "over tls\n" {
		t.Fatalf("turn over TLS: %v", r)
	}
	if strings.Contains(e.core.Logs(), "serves plaintext") {
		t.Fatal("Core served the gateway in plaintext")
	}

	// The gateway speaks only TLS: a plaintext Connect fails.
	conn, err := grpc.NewClient(e.gateway, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	stream, err := runtimev1.NewRuntimeGatewayServiceClient(conn).Connect(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	if err == nil {
		t.Fatal("a plaintext client reached the TLS gateway")
	}
}
