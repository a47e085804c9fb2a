package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap/internal/gatewaytest"
)

const (
	testDevice     = "6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"
	testCredential = "binary-test-credential-0123456789abcdefghijklmnop"
)

const testCoreURL = "https://core.example.test"

func bootstrapJSON(coreURL, credential string) string {
	return `{"version":1,"core_url":"` + coreURL + `","device_id":"` + testDevice +
		`","credential":"` + credential + `"}`
}

// buildBinary builds berth-runtime once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "berth-runtime-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "berth-runtime")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", errors.New("go build: " + err.Error() + "\n" + string(out))
	}
	return bin, nil
})

func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := buildBinary(); err == nil && bin != "" {
		_ = os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

func writeBootstrap(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runtime-bootstrap.json")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("run: %v", err)
	}
	return exit.ExitCode()
}

// accept returns the daemon's next connection to core, failing after 30s
// with the daemon's output.
func accept(t *testing.T, core *gatewaytest.Core, d *daemon) *gatewaytest.Conn {
	t.Helper()
	c, ok := core.TryAccept(t, 30*time.Second)
	if !ok {
		t.Fatalf("no connection within 30s; output %q", d.output())
	}
	return c
}

// welcome takes the hello, sends welcome and a keepalive, and returns the
// hello once the keepalive is answered. A prepared comes before the answer
// when this machine has a writable /workspace.
func welcome(t *testing.T, c *gatewaytest.Conn, seq int64) *runtimev1.Hello {
	t.Helper()
	hello := c.Next().GetHello()
	if hello == nil {
		t.Fatal("first message is not hello")
	}
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Welcome{Welcome: &runtimev1.Welcome{ConnectionId: "c"}}})
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Keepalive{Keepalive: &runtimev1.Keepalive{Sequence: seq}}})
	m := c.Next()
	if m.GetPrepared() != nil {
		m = c.Next()
	}
	if m.GetKeepaliveAck() == nil || m.GetKeepaliveAck().GetSequence() != seq {
		t.Fatalf("got %v, want the keepalive ack", m)
	}
	return hello
}

// daemon is a running berth-runtime connect; its stdout and stderr go to
// one locked buffer.
type daemon struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func startDaemon(t *testing.T, coreURL string) *daemon {
	t.Helper()
	return startDaemonAt(t, writeBootstrap(t, bootstrapJSON(coreURL, testCredential), 0o600))
}

// startDaemonAt starts berth-runtime connect with the bootstrap file at
// path.
func startDaemonAt(t *testing.T, path string) *daemon {
	t.Helper()
	d := &daemon{cmd: exec.Command(binary(t), "connect", "--profile", "default", "--bootstrap-file", path), done: make(chan error, 1)}
	d.cmd.Stdout = d // nothing is expected on stdout; keep it for the secret check
	d.cmd.Stderr = d
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
	})
	return d
}

func (d *daemon) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.Write(p)
}

func (d *daemon) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// wait returns the exit code, failing after 30s.
func (d *daemon) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-d.done:
		d.done <- err // for the cleanup
		return exitCode(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("did not exit within 30s; output %q", d.output())
		return -1
	}
}

func TestConnectSpeaksToCoreAndStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			core, url := gatewaytest.Start(t)
			d := startDaemon(t, url)
			c := accept(t, core, d)
			hello := welcome(t, c, 9)
			if hello.GetDeviceId() != testDevice || hello.GetCredential() != testCredential ||
				hello.GetProtocolVersion() != runtimev1.ProtocolVersion || hello.GetRuntimeVersion() == "" {
				t.Fatalf("hello %v", hello)
			}
			if err := d.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := d.wait(t); code != 0 {
				t.Fatalf("exit %d after %v, want 0; output %q", code, sig, d.output())
			}
			out := d.output()
			if !strings.Contains(out, `"msg":"validated the bootstrap file","device_id":"`+testDevice+`"`) ||
				!strings.Contains(out, `"msg":"stopping on signal"`) {
				t.Fatalf("output %q", out)
			}
			if strings.Contains(out, testCredential) {
				t.Fatalf("output carries the credential: %q", out)
			}
		})
	}
}

func TestConnectRetriesUntilSignal(t *testing.T) {
	// Nothing listens on this address: the daemon keeps retrying.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + lis.Addr().String()
	_ = lis.Close()
	d := startDaemon(t, url)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(d.output(), `"msg":"connection ended"`) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than two attempts within 30s; output %q", d.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0; output %q", code, d.output())
	}
}

func TestConnectStopsForGood(t *testing.T) {
	for _, reason := range []string{runtimev1.ReasonCredentialRejected, runtimev1.ReasonRevoked, runtimev1.ReasonProtocolMismatch} {
		t.Run(reason, func(t *testing.T) {
			core, url := gatewaytest.Start(t)
			d := startDaemon(t, url)
			c := accept(t, core, d)
			st, err := status.New(codes.PermissionDenied, "fixed").WithDetails(&errdetails.ErrorInfo{Domain: runtimev1.ErrorDomain, Reason: reason})
			if err != nil {
				t.Fatal(err)
			}
			c.End(st.Err())
			if code := d.wait(t); code != 3 {
				t.Fatalf("exit %d, want 3; output %q", code, d.output())
			}
			out := d.output()
			if !strings.Contains(out, "berth-runtime: core stopped this runtime for good ("+reason+"); exiting\n") {
				t.Fatalf("output %q lacks the stop line", out)
			}
			if strings.Contains(out, testCredential) {
				t.Fatalf("output carries the credential: %q", out)
			}
		})
	}
}

func TestConnectRejectsInvalidBootstrap(t *testing.T) {
	bin := binary(t)
	cases := map[string]struct {
		content string
		mode    os.FileMode
	}{
		"unknown key":      {strings.Replace(bootstrapJSON(testCoreURL, testCredential), `{`, `{"x":"`+testCredential+`",`, 1), 0o600},
		"case alias":       {strings.Replace(bootstrapJSON(testCoreURL, testCredential), `"credential"`, `"Credential"`, 1), 0o600},
		"bad device id":    {strings.Replace(bootstrapJSON(testCoreURL, testCredential), testDevice, "device-"+testCredential, 1), 0o600},
		"credential space": {bootstrapJSON(testCoreURL, testCredential+" x"), 0o600},
		"trailing data":    {bootstrapJSON(testCoreURL, testCredential) + testCredential, 0o600},
		"group readable":   {bootstrapJSON(testCoreURL, testCredential), 0o640},
		"world readable":   {bootstrapJSON(testCoreURL, testCredential), 0o644},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeBootstrap(t, tc.content, tc.mode)
			out, err := exec.Command(bin, "connect", "--profile", "default", "--bootstrap-file", path).CombinedOutput()
			if code := exitCode(t, err); code != 1 {
				t.Fatalf("exit %d, want 1; output %q", code, out)
			}
			if strings.Contains(string(out), testCredential) || strings.Contains(string(out), testCredential[:20]) {
				t.Fatalf("output carries the credential: %q", out)
			}
			if !strings.Contains(string(out), "bootstrap file") {
				t.Fatalf("output does not say what failed: %q", out)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		out, err := exec.Command(bin, "connect", "--bootstrap-file", filepath.Join(t.TempDir(), "none.json")).CombinedOutput()
		if code := exitCode(t, err); code != 1 {
			t.Fatalf("exit %d, want 1; output %q", code, out)
		}
	})
}

func TestUsageAndVersion(t *testing.T) {
	bin := binary(t)
	valid := writeBootstrap(t, bootstrapJSON(testCoreURL, testCredential), 0o600)
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"connect", "--no-such-flag"},
		{"connect", "--profile", "other", "--bootstrap-file", valid},
		{"connect", "--bootstrap-file", valid, "extra"},
		{"version", "extra"},
		{"wake", "extra"},
		{"wake", "--no-such-flag"},
		{"wake", "--bootstrap-file"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if code := exitCode(t, err); code != 2 {
			t.Errorf("%q: exit %d, want 2; output %q", args, code, out)
		}
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "berth-runtime ") || !strings.Contains(string(out), "bootstrap file version 1") {
		t.Fatalf("version output %q", out)
	}
}
