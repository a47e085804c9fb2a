package nodeproto

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

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store"
)

// coreProc is one berth-core process.
type coreProc struct {
	t        *testing.T
	dsn      string
	cmd      *exec.Cmd
	stateDir string
	admin    string
	public   string
	mu       sync.Mutex
	log      strings.Builder
	serving  chan struct{}
	exited   chan struct{}
}

// startCore starts berth-core on database dsn with its own state directory
// and returns once it serves (or, with wait=false, once it started).
func startCore(t *testing.T, dsn, stateDir string, wait bool) *coreProc {
	t.Helper()
	c := &coreProc{t: t, dsn: dsn, stateDir: stateDir, serving: make(chan struct{}), exited: make(chan struct{})}
	c.cmd = exec.Command(coreBin, "serve", "--migrate", "--public-url", "https://core.berth.test",
		"--state-dir", stateDir, "--admin-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0",
		"--lease-ttl", "3s", "--node-interval", "200ms", "--lifecycle-interval", "300ms")
	// The database URL travels in the environment, never in argv.
	c.cmd.Env = append(os.Environ(), "BERTH_DATABASE_URL="+dsn)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.log.WriteString(line + "\n")
			c.mu.Unlock()
			var e struct {
				Msg    string `json:"msg"`
				Admin  string `json:"admin"`
				Public string `json:"public"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "serving" {
				c.mu.Lock()
				c.admin, c.public = e.Admin, e.Public
				c.mu.Unlock()
				close(c.serving)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { c.stop() })
	if wait {
		c.waitServing(30 * time.Second)
	}
	return c
}

func (c *coreProc) waitServing(d time.Duration) {
	c.t.Helper()
	select {
	case <-c.serving:
	case <-c.exited:
		c.t.Fatalf("berth-core exited:\n%s", c.logs())
	case <-time.After(d):
		c.t.Fatalf("berth-core did not serve within %v:\n%s", d, c.logs())
	}
}

func (c *coreProc) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

func (c *coreProc) stop() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		c.t.Errorf("berth-core ignored SIGTERM")
	}
}

// adminClient dials the admin API with the operator's token from the
// state directory.
func (c *coreProc) adminClient(t *testing.T) (*grpc.ClientConn, context.Context) {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(c.stateDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	addr := c.admin
	c.mu.Unlock()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+strings.TrimSpace(string(token))))
	return cc, ctx
}

func coreStateDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "core")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCoreClaimsOnceAndHoldsTheLease: Core claims the installation once
// and a new owner epoch per start; a second Core on the same database
// waits for the execution lease and takes over, with a higher epoch, when
// the first stops.
func TestCoreClaimsOnceAndHoldsTheLease(t *testing.T) {
	dsn := storetestDatabase(t)
	first := startCore(t, dsn, coreStateDir(t), true)
	cc, ctx := first.adminClient(t)
	inst1, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
	if err != nil {
		t.Fatalf("GetInstallation: %v", err)
	}
	if _, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(context.Background(), &adminv1.GetInstallationRequest{Name: "installation"}); err == nil {
		t.Fatal("admin call without the token succeeded")
	}
	// Every Core of an installation holds the same master key (the CA key
	// is sealed under it); the operator gives it to the standby.
	standby := coreStateDir(t)
	key, err := os.ReadFile(filepath.Join(first.stateDir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(standby, "master.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	second := startCore(t, dsn, standby, false)
	time.Sleep(2 * time.Second)
	select {
	case <-second.serving:
		t.Fatalf("a second Core served while the first held the lease:\n%s", second.logs())
	default:
	}
	if !strings.Contains(second.logs(), "another berth-core holds the execution lease") {
		t.Fatalf("the second Core does not say it waits:\n%s", second.logs())
	}
	first.stop()
	second.waitServing(30 * time.Second)
	cc2, ctx2 := second.adminClient(t)
	inst2, err := adminv1.NewInstallationServiceClient(cc2).GetInstallation(ctx2, &adminv1.GetInstallationRequest{Name: "installation"})
	if err != nil {
		t.Fatal(err)
	}
	i1, i2 := inst1.GetInstallation(), inst2.GetInstallation()
	if i1.GetId() != i2.GetId() || i2.GetOwnerEpoch() <= i1.GetOwnerEpoch() {
		t.Fatalf("installation %s epoch %d, then %s epoch %d", i1.GetId(), i1.GetOwnerEpoch(), i2.GetId(), i2.GetOwnerEpoch())
	}
	if i1.GetCaFingerprint() == "" || i1.GetCaFingerprint() != i2.GetCaFingerprint() {
		t.Fatalf("CA fingerprint %q then %q: the CA must be created once and reopened", i1.GetCaFingerprint(), i2.GetCaFingerprint())
	}
	for _, c := range []*coreProc{first, second} {
		tok, _ := os.ReadFile(filepath.Join(c.stateDir, "admin-token"))
		if strings.Contains(c.logs(), strings.TrimSpace(string(tok))) || strings.Contains(c.logs(), "password") {
			t.Fatal("a secret reached Core's log")
		}
	}
}

// TestCoreWithAnotherMasterKeyRefusesToStart: the installation CA's key is
// sealed under the master key; a Core given another key stops with a clear
// error instead of minting a second CA.
func TestCoreWithAnotherMasterKeyRefusesToStart(t *testing.T) {
	dsn := storetestDatabase(t)
	first := startCore(t, dsn, coreStateDir(t), true)
	first.stop()
	other := startCore(t, dsn, coreStateDir(t), false)
	select {
	case <-other.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("a Core with another master key kept running")
	}
	if !strings.Contains(other.logs(), "installation CA key: sealed value does not open") {
		t.Fatalf("unclear refusal:\n%s", other.logs())
	}
}

// store opens Core's database directly, to check what Core recorded.
func (c *coreProc) store(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
