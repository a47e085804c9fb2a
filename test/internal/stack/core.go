package stack

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// DefaultPublicURL is the public URL Core announces unless CoreOptions
// names another.
const DefaultPublicURL = "https://core.berth.test"

// CoreOptions shape a berth-core process beyond its database and state
// directory.
type CoreOptions struct {
	// PublicURL is passed as --public-url (default DefaultPublicURL).
	PublicURL string
	// Args are extra arguments appended after the defaults of `serve`; a
	// flag given again here overrides the default (the last one wins).
	Args []string
	// Env are extra environment entries (KEY=value).
	Env []string
	// RuntimeListen, when set, serves the Runtime gateway there
	// (--runtime-listen); RuntimeGateway sets it. With an http PublicURL
	// the gateway is plaintext (--runtime-insecure), with an https one TLS
	// from the installation CA.
	RuntimeListen string
	// Defaults runs Core with its own defaults for every interval and TTL
	// (lease, node reconciliation, lifecycle passes, Runtime keepalives),
	// as an operator would: what benchmarks measure. Without it Core runs
	// with short ones so that tests finish quickly.
	Defaults bool
}

// Core is one berth-core process.
type Core struct {
	t        testing.TB
	DSN      string
	StateDir string
	Cmd      *exec.Cmd
	// Serving is closed once Core logged its `serving` line; Exited once
	// the process has exited.
	Serving chan struct{}
	Exited  chan struct{}
	mu      sync.Mutex
	admin   string
	public  string
	log     processLog
}

// processLog keeps what a started binary writes to stderr, so that a
// test can show it on failure; Core and the node agents log the same way.
type processLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

// follow reads r to its end in the background, keeping each line and then
// handing it to watch, which looks for the line announcing the process
// serves. The returned channel is closed once r is drained.
func (l *processLog) follow(r io.Reader, watch func(line string)) (drained <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			l.mu.Lock()
			l.buf.WriteString(line + "\n")
			l.mu.Unlock()
			watch(line)
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return done
}

// String is everything kept so far.
func (l *processLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// StartCore starts berth-core on database dsn with its own state directory
// and zero CoreOptions (so the tests' short intervals), and returns once it
// serves (or, with wait=false, once it started).
func StartCore(t testing.TB, dsn, stateDir string, wait bool) *Core {
	t.Helper()
	return StartCoreWith(t, dsn, stateDir, wait, CoreOptions{})
}

// StartCoreWith is StartCore with options. The test's cleanup stops Core.
func StartCoreWith(t testing.TB, dsn, stateDir string, wait bool, o CoreOptions) *Core {
	t.Helper()
	if o.PublicURL == "" {
		o.PublicURL = DefaultPublicURL
	}
	c := &Core{t: t, DSN: dsn, StateDir: stateDir, Serving: make(chan struct{}), Exited: make(chan struct{})}
	args := []string{"serve", "--migrate", "--public-url", o.PublicURL,
		"--state-dir", stateDir, "--admin-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"}
	if !o.Defaults {
		args = append(args, "--lease-ttl", "3s", "--node-interval", "200ms", "--lifecycle-interval", "300ms", "--create-abandon-after", "10s",
			"--quiesce-timeout", "10s", "--restore-abandon-after", "10s")
	}
	if o.RuntimeListen != "" {
		args = append(args, "--runtime-listen", o.RuntimeListen)
		if strings.HasPrefix(o.PublicURL, "http://") {
			args = append(args, "--runtime-insecure") // https: TLS from the installation CA
		}
		if !o.Defaults {
			args = append(args, "--runtime-keepalive", "2s")
		}
	}
	c.Cmd = exec.Command(coreBin, append(args, o.Args...)...)
	// The database URL travels in the environment, never in argv.
	c.Cmd.Env = append(append(os.Environ(), "BERTH_DATABASE_URL="+dsn), o.Env...)
	stderr, err := c.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	drained := c.log.follow(stderr, func(line string) {
		var e struct {
			Msg    string `json:"msg"`
			Admin  string `json:"admin"`
			Public string `json:"public"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "serving" {
			c.mu.Lock()
			c.admin, c.public = e.Admin, e.Public
			c.mu.Unlock()
			close(c.Serving)
		}
	})
	// os/exec: Wait closes the pipe, so it waits until the log has read
	// everything; Exited then means the log is complete.
	go func() { <-drained; _ = c.Cmd.Wait(); close(c.Exited) }()
	t.Cleanup(c.Stop)
	if wait {
		c.WaitServing(30 * time.Second)
	}
	return c
}

// WaitServing waits up to d for Core to serve; the test fails if it exits
// or does not serve in time.
func (c *Core) WaitServing(d time.Duration) {
	c.t.Helper()
	select {
	case <-c.Serving:
	case <-c.Exited:
		c.t.Fatalf("berth-core exited:\n%s", c.Logs())
	case <-time.After(d):
		c.t.Fatalf("berth-core did not serve within %v:\n%s", d, c.Logs())
	}
}

// Logs is everything Core wrote to stderr.
func (c *Core) Logs() string { return c.log.String() }

// AdminAddr is the admin API's address from the `serving` line.
func (c *Core) AdminAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admin
}

// PublicAddr is the public (enrollment and node) address from the
// `serving` line.
func (c *Core) PublicAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.public
}

// Stop ends Core with SIGTERM, killing it after 20 s.
func (c *Core) Stop() {
	if !Terminate(c.Cmd, c.Exited, 20*time.Second) {
		c.t.Errorf("berth-core ignored SIGTERM")
	}
}

// Terminate ends a started process with SIGTERM and waits up to grace for
// exited to close; past that it kills the process. It reports whether the
// process ended by itself: before the call, or on SIGTERM. Core, the node
// agents and the chaos suite's private engine stop this way.
func Terminate(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration) bool {
	select {
	case <-exited:
		return true
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return true
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		return false
	}
}

// Kill ends Core with SIGKILL and waits for it to exit.
func (c *Core) Kill() {
	_ = c.Cmd.Process.Signal(syscall.SIGKILL)
	<-c.Exited
}

// AdminToken is the operator's admin token from the state directory.
func (c *Core) AdminToken(t testing.TB) string {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(c.StateDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(token))
}

// AdminClient dials the admin API and returns the connection and a context
// carrying the operator's token.
func (c *Core) AdminClient(t testing.TB) (*grpc.ClientConn, context.Context) {
	t.Helper()
	token := c.AdminToken(t)
	cc, err := grpc.NewClient(c.AdminAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
	return cc, ctx
}

// Store opens Core's database directly, to check what Core recorded.
func (c *Core) Store(t testing.TB) *storetest.Store {
	t.Helper()
	st, err := store.Open(context.Background(), c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return storetest.Wrap(st)
}

// CoreStateDir creates an empty 0700 state directory for Core.
func CoreStateDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "core")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
