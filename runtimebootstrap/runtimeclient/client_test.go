package runtimeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap"
	"berth.dev/runtimebootstrap/internal/gatewaytest"
	"berth.dev/runtimebootstrap/internal/park"
	"berth.dev/runtimebootstrap/turnexec"
)

const (
	testDevice     = "6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"
	testCredential = "runtime-client-test-credential-0123456789abcdef"
	testVersion    = "v-test"
	wait           = 30 * time.Second
)

func startCore(t *testing.T) (*gatewaytest.Core, string) {
	t.Helper()
	core, url := gatewaytest.Start(t)
	// The path must be ignored by the client.
	return core, url + "/ignored/path"
}

// syncBuffer is a log sink shared by the client's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type harness struct {
	core      *gatewaytest.Core
	logs      *syncBuffer
	workspace string
	park      park.Dir // the directory of the client's bootstrap path
	done      chan error
	cancel    context.CancelFunc
}

// start runs a client against a fresh fake Core. Cleanup stops it and
// checks that the logs are JSON and never carry the credential.
func start(t *testing.T, secrets ...string) *harness {
	t.Helper()
	core, url := startCore(t)
	h := &harness{core: core, logs: &syncBuffer{}, workspace: filepath.Join(t.TempDir(), "workspace"),
		park: park.Dir(t.TempDir()), done: make(chan error, 1)}
	if err := os.Mkdir(h.workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{
		Bootstrap:      runtimebootstrap.File{Version: 1, CoreURL: url, DeviceID: testDevice, Credential: runtimebootstrap.NewSecret(testCredential)},
		BootstrapPath:  filepath.Join(string(h.park), "runtime-bootstrap.json"),
		RuntimeVersion: testVersion,
		Runner:         &turnexec.Runner{WorkspaceRoot: h.workspace, WaitDelay: 500 * time.Millisecond},
		Logger:         slog.New(slog.NewJSONHandler(h.logs, nil)),
		Backoff:        Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrStopped) {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(wait):
			t.Error("Run did not return after cancel")
		}
		logs := h.logs.String()
		for _, s := range append([]string{testCredential}, secrets...) {
			if strings.Contains(logs, s) {
				t.Errorf("logs carry a secret %q:\n%s", s, logs)
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("log line is not JSON: %q", line)
			}
		}
	})
	return h
}

func (h *harness) accept(t *testing.T) *gatewaytest.Conn {
	t.Helper()
	return h.core.Accept(t)
}

func runTurn(c *gatewaytest.Conn, rt *runtimev1.RunTurn) {
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_RunTurn{RunTurn: rt}})
}

func shellTurn(id, script string) *runtimev1.RunTurn {
	return &runtimev1.RunTurn{TurnId: id, Program: &runtimev1.RunTurn_ShellScript{ShellScript: script},
		Timeout: durationpb.New(time.Minute), MaxOutputBytes: 1 << 20}
}

// turnRecord is what a Turn sent, checked for order on the way.
type turnRecord struct {
	started bool
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	result  *runtimev1.TurnResult
}

// collect reads one Turn's messages until its result. Messages of other
// turns are returned to the caller through other.
func collect(t *testing.T, c *gatewaytest.Conn, id string, until func(*turnRecord) bool) *turnRecord {
	t.Helper()
	r := &turnRecord{}
	for r.result == nil && (until == nil || !until(r)) {
		m := c.Next()
		switch {
		case m.GetTurnStarted() != nil:
			if m.GetTurnStarted().GetTurnId() != id || r.started {
				t.Fatalf("unexpected %v", m)
			}
			r.started = true
		case m.GetTurnOutput() != nil:
			o := m.GetTurnOutput()
			if o.GetTurnId() != id || !r.started || len(o.GetData()) == 0 || len(o.GetData()) > 64<<10 {
				t.Fatalf("unexpected output turn %q started %v size %d", o.GetTurnId(), r.started, len(o.GetData()))
			}
			buf := &r.stdout
			if o.GetStream() == runtimev1.OutputStream_OUTPUT_STREAM_STDERR {
				buf = &r.stderr
			} else if o.GetStream() != runtimev1.OutputStream_OUTPUT_STREAM_STDOUT {
				t.Fatalf("output stream %v", o.GetStream())
			}
			if o.GetOffset() != int64(buf.Len()) {
				t.Fatalf("output at offset %d, want %d", o.GetOffset(), buf.Len())
			}
			buf.Write(o.GetData())
		case m.GetTurnResult() != nil:
			if m.GetTurnResult().GetTurnId() != id {
				t.Fatalf("result of turn %q while collecting %q", m.GetTurnResult().GetTurnId(), id)
			}
			r.result = m.GetTurnResult()
		default:
			t.Fatalf("unexpected message %v", m)
		}
	}
	return r
}

func TestHelloThenPreparedAfterWelcome(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	hello := c.Welcome(true)
	want := &runtimev1.Hello{ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: testDevice, Credential: testCredential, RuntimeVersion: testVersion}
	if !proto.Equal(hello, want) {
		t.Fatalf("hello %v, want %v", hello, want)
	}
}

func TestKeepaliveAck(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	for _, seq := range []int64{1, 2, 41} {
		c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Keepalive{Keepalive: &runtimev1.Keepalive{Sequence: seq}}})
		if got := c.Next().GetKeepaliveAck(); got == nil || got.GetSequence() != seq {
			t.Fatalf("keepalive %d answered with %v", seq, got)
		}
	}
}

func TestPreparationFailureKeepsConnectionAndRetries(t *testing.T) {
	h := start(t)
	if err := os.Remove(h.workspace); err != nil {
		t.Fatal(err)
	}
	c := h.accept(t)
	c.Welcome(false)
	// No prepared: the next message answers the keepalive.
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Keepalive{Keepalive: &runtimev1.Keepalive{Sequence: 7}}})
	if got := c.Next().GetKeepaliveAck(); got.GetSequence() != 7 {
		t.Fatalf("got %v, want the keepalive ack", got)
	}
	if !strings.Contains(h.logs.String(), `"step":"workspace"`) {
		t.Fatalf("no preparation failure logged:\n%s", h.logs.String())
	}
	// The next connection prepares again.
	if err := os.Mkdir(h.workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	c.End(status.Error(codes.Unavailable, "bye"))
	c = h.accept(t)
	c.Welcome(true)
	if entries, _ := os.ReadDir(h.workspace); len(entries) != 0 {
		t.Fatalf("preparation left %d files in the workspace", len(entries))
	}
}

func TestTurnOutputAndResultInOrder(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	// 200 KiB of stdout takes several chunks; stderr interleaves.
	runTurn(c, shellTurn("turn-1", `head -c 204800 /dev/zero | tr '\0' a; printf err >&2; exit 3`))
	r := collect(t, c, "turn-1", nil)
	want := &runtimev1.TurnResult{TurnId: "turn-1", Outcome: runtimev1.TurnResult_OUTCOME_EXITED, ExitCode: 3,
		StdoutBytes: 204800, StderrBytes: 3}
	if !proto.Equal(r.result, want) {
		t.Fatalf("result %v, want %v", r.result, want)
	}
	if r.stdout.String() != strings.Repeat("a", 204800) || r.stderr.String() != "err" {
		t.Fatalf("output: %d stdout bytes, stderr %q", r.stdout.Len(), r.stderr.String())
	}

	// The next Turn on the same connection, with argv, env, stdin and a
	// working directory.
	if err := os.Mkdir(filepath.Join(h.workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	runTurn(c, &runtimev1.RunTurn{TurnId: "turn-2",
		Program:          &runtimev1.RunTurn_Argv{Argv: &runtimev1.Argv{Args: []string{"sh", "-c", `pwd; printf %s "$GREETING"; cat`}}},
		WorkingDirectory: filepath.Join(h.workspace, "sub"),
		Env:              map[string]string{"GREETING": "hi "},
		Stdin:            []byte{0, 1, 2, 255},
		MaxOutputBytes:   10,
	})
	r = collect(t, c, "turn-2", nil)
	wantOut := filepath.Join(h.workspace, "sub") + "\nhi \x00\x01\x02\xff"
	if r.result.GetOutcome() != runtimev1.TurnResult_OUTCOME_EXITED || r.result.GetStdoutBytes() != int64(len(wantOut)) ||
		!r.result.GetStdoutTruncated() || r.stdout.String() != wantOut[:10] {
		t.Fatalf("turn-2: result %v stdout %q", r.result, r.stdout.String())
	}
}

func TestTurnFailures(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	for name, tc := range map[string]struct {
		rt   *runtimev1.RunTurn
		code string
	}{
		"no program":      {&runtimev1.RunTurn{TurnId: "t"}, turnexec.CodeInvalidTurn},
		"reserved env":    {&runtimev1.RunTurn{TurnId: "t", Program: &runtimev1.RunTurn_ShellScript{ShellScript: "true"}, Env: map[string]string{"BERTH_X": "1"}}, turnexec.CodeInvalidTurn},
		"bad timeout":     {&runtimev1.RunTurn{TurnId: "t", Program: &runtimev1.RunTurn_ShellScript{ShellScript: "true"}, Timeout: &durationpb.Duration{Seconds: 1, Nanos: -1}}, turnexec.CodeInvalidTurn},
		"outside":         {&runtimev1.RunTurn{TurnId: "t", Program: &runtimev1.RunTurn_ShellScript{ShellScript: "true"}, WorkingDirectory: "/etc"}, turnexec.CodeInvalidTurn},
		"missing dir":     {&runtimev1.RunTurn{TurnId: "t", Program: &runtimev1.RunTurn_ShellScript{ShellScript: "true"}, WorkingDirectory: h.workspace + "/none"}, turnexec.CodeWorkingDirectoryMissing},
		"missing program": {&runtimev1.RunTurn{TurnId: "t", Program: &runtimev1.RunTurn_Argv{Argv: &runtimev1.Argv{Args: []string{"berth-no-such-program"}}}}, turnexec.CodeProgramNotFound},
	} {
		runTurn(c, tc.rt)
		r := collect(t, c, "t", nil)
		want := &runtimev1.TurnResult{TurnId: "t", Outcome: runtimev1.TurnResult_OUTCOME_FAILED, FailureCode: tc.code}
		if r.started || !proto.Equal(r.result, want) {
			t.Errorf("%s: started %v result %v, want %v", name, r.started, r.result, want)
		}
	}
}

func grandchildPid(t *testing.T, r *turnRecord) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.Fields(r.stdout.String())[0])
	if err != nil {
		t.Fatalf("stdout %q", r.stdout.String())
	}
	return pid
}

func goneWithin(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readyTurn(r *turnRecord) bool { return strings.Contains(r.stdout.String(), "ready") }

func TestCancelTurnAndSecondTurnRefused(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	runTurn(c, shellTurn("a", "sleep 300 & echo $!; echo ready; wait"))
	ra := collect(t, c, "a", readyTurn)
	pid := grandchildPid(t, ra)

	// A second Turn while "a" runs is refused; "a" keeps running.
	runTurn(c, shellTurn("b", "echo b"))
	rb := collect(t, c, "b", nil)
	want := &runtimev1.TurnResult{TurnId: "b", Outcome: runtimev1.TurnResult_OUTCOME_FAILED, FailureCode: turnexec.CodeInvalidTurn}
	if !proto.Equal(rb.result, want) || rb.started {
		t.Fatalf("second turn: %v", rb.result)
	}
	// Cancelling an unknown Turn does nothing.
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_CancelTurn{CancelTurn: &runtimev1.CancelTurn{TurnId: "b"}}})
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("turn a's process is gone after a cancel of another turn: %v", err)
	}

	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_CancelTurn{CancelTurn: &runtimev1.CancelTurn{TurnId: "a"}}})
	ra2 := collect(t, c, "a", nil)
	if ra2.result.GetOutcome() != runtimev1.TurnResult_OUTCOME_CANCELLED {
		t.Fatalf("cancelled turn: %v", ra2.result)
	}
	if !goneWithin(pid, 5*time.Second) {
		t.Fatalf("grandchild %d survived the cancel", pid)
	}
	// The connection serves the next Turn.
	runTurn(c, shellTurn("c", "echo c"))
	if r := collect(t, c, "c", nil); r.stdout.String() != "c\n" || r.result.GetExitCode() != 0 {
		t.Fatalf("turn after cancel: %v %q", r.result, r.stdout.String())
	}
}

func TestReconnectAfterStreamDropKillsTurn(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	runTurn(c, shellTurn("a", "sleep 300 & echo $!; echo ready; wait"))
	pid := grandchildPid(t, collect(t, c, "a", readyTurn))
	c.End(status.Error(codes.Unavailable, "core restarting"))

	c2 := h.accept(t)
	hello := c2.Welcome(true)
	if hello.GetCredential() != testCredential {
		t.Fatal("reconnect hello lacks the credential")
	}
	if !goneWithin(pid, 5*time.Second) {
		t.Fatalf("turn process %d survived the lost connection", pid)
	}
	// The old stream got no result for "a" after it ended; the new one
	// gets nothing for it either.
	c2.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Keepalive{Keepalive: &runtimev1.Keepalive{Sequence: 1}}})
	if m := c2.Next(); m.GetKeepaliveAck() == nil {
		t.Fatalf("unexpected message on the new stream: %v", m)
	}
}

func endWith(code codes.Code, reason string) error {
	st, err := status.New(code, "fixed message").WithDetails(&errdetails.ErrorInfo{Domain: runtimev1.ErrorDomain, Reason: reason})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func TestStopForGood(t *testing.T) {
	for reason, code := range map[string]codes.Code{
		runtimev1.ReasonCredentialRejected: codes.Unauthenticated,
		runtimev1.ReasonRevoked:            codes.PermissionDenied,
		runtimev1.ReasonProtocolMismatch:   codes.FailedPrecondition,
	} {
		t.Run(reason, func(t *testing.T) {
			h := start(t)
			c := h.accept(t)
			c.Next() // hello
			c.End(endWith(code, reason))
			select {
			case err := <-h.done:
				var stop *StopError
				if !errors.As(err, &stop) || stop.Reason != reason || !errors.Is(err, ErrStopped) {
					t.Fatalf("Run returned %v, want a stop for %s", err, reason)
				}
				h.done <- nil // for the cleanup
			case <-time.After(wait):
				t.Fatal("Run did not stop")
			}
			if _, ok := h.core.TryAccept(t, 200*time.Millisecond); ok {
				t.Fatal("reconnected after a stop-for-good reason")
			}
		})
	}
}

func TestRetryableEndsReconnect(t *testing.T) {
	h := start(t)
	for _, end := range []error{
		endWith(codes.Unavailable, runtimev1.ReasonNotAdmitted),
		endWith(codes.InvalidArgument, runtimev1.ReasonInvalidMessage),
		// A stop reason in another domain is not Core's.
		func() error {
			st, _ := status.New(codes.Unauthenticated, "x").WithDetails(&errdetails.ErrorInfo{Domain: "other.example", Reason: runtimev1.ReasonRevoked})
			return st.Err()
		}(),
		status.Error(codes.Internal, "boom"),
		nil, // a clean end of the stream
	} {
		c := h.accept(t)
		c.Next() // hello
		c.End(end)
	}
	h.accept(t).Welcome(true)
	select {
	case err := <-h.done:
		t.Fatalf("Run returned %v", err)
	default:
	}
}

func TestSecretsNeverLogged(t *testing.T) {
	const envSecret, stdinSecret = "env-value-secret-4711", "stdin-secret-0815"
	h := start(t, envSecret, stdinSecret)
	c := h.accept(t)
	c.Welcome(true)
	rt := shellTurn("s", `printf %s "$TOKEN" >/dev/null; cat >/dev/null`)
	rt.Env = map[string]string{"TOKEN": envSecret}
	rt.Stdin = []byte(stdinSecret)
	runTurn(c, rt)
	if r := collect(t, c, "s", nil); r.result.GetExitCode() != 0 {
		t.Fatalf("result %v", r.result)
	}
	c.End(endWith(codes.Unauthenticated, runtimev1.ReasonCredentialRejected))
	<-h.done
	h.done <- nil
	logs := h.logs.String()
	for _, msg := range []string{"connected to core", "turn started", "turn ended", "core stopped this runtime for good"} {
		if !strings.Contains(logs, msg) {
			t.Errorf("logs lack %q:\n%s", msg, logs)
		}
	}
	// The cleanup checks that none of the secrets is in the logs.
}

func TestDialTarget(t *testing.T) {
	for raw, want := range map[string]struct {
		target string
		tls    bool
	}{
		"http://core.example":            {"dns:///core.example:80", false},
		"https://core.example":           {"dns:///core.example:443", true},
		"https://core.example:8443/base": {"dns:///core.example:8443", true},
		"http://[::1]:9000/x/y":          {"dns:///[::1]:9000", false},
	} {
		target, useTLS, _, err := dialTarget(raw)
		if err != nil || target != want.target || useTLS != want.tls {
			t.Errorf("%s: %q %v %v, want %q %v", raw, target, useTLS, err, want.target, want.tls)
		}
	}
	for _, raw := range []string{"ftp://core.example", "https://", "://x"} {
		if _, _, _, err := dialTarget(raw); err == nil {
			t.Errorf("%s: accepted", raw)
		}
	}
}

func TestNewRejectsInvalidBootstrapWithoutTheCredential(t *testing.T) {
	_, err := New(Config{Bootstrap: runtimebootstrap.File{Version: 1, CoreURL: "ftp://x", DeviceID: testDevice, Credential: runtimebootstrap.NewSecret(testCredential)}})
	if err == nil || strings.Contains(err.Error(), testCredential) {
		t.Fatalf("New: %v", err)
	}
}

func TestBackoffDelays(t *testing.T) {
	b := Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Jitter: func(d time.Duration) time.Duration { return d }}
	var got []time.Duration
	for i := range 9 {
		got = append(got, b.delay(i))
	}
	want := []time.Duration{200, 400, 800, 1600, 3200, 6400, 10000, 10000, 10000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v", got)
		}
	}
	b.Jitter = nil
	for i := range 1000 {
		if d := b.delay(i % 12); d < 0 || d > 10*time.Second {
			t.Fatalf("jittered delay %v", d)
		}
	}
}
