package e2b_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/errdefs"
)

func sandboxRef() sandbox.Reference { return contracttest.NewReference() }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// create creates ref's sandbox through p and requires settlement.
func create(t *testing.T, p sandbox.SandboxProvider, ref sandbox.Reference) sandbox.Info {
	t.Helper()
	info, err := p.Create(ctxT(t), contracttest.CreateRequest(ref, sandbox.Resources{}))
	if err != nil || !info.IsSettledRunning(ref) || !info.CreateSettled {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	return info
}

// only is the fixture's one sandbox.
func only(t *testing.T, f *e2btest.Fixture) e2btest.Sandbox {
	t.Helper()
	all := f.Sandboxes()
	if len(all) != 1 {
		t.Fatalf("fixture holds %d sandboxes, want 1", len(all))
	}
	return all[0]
}

// checkNoReplay: at most one create POST per allocation, and no call
// outside the adapter's set (connect, resume, pause...).
func checkNoReplay(t *testing.T, f *e2btest.Fixture) {
	t.Helper()
	creates := map[string]int{}
	for _, r := range f.Requests() {
		if strings.HasPrefix(r.Call, "unexpected:") {
			t.Errorf("the adapter called %s", r.Call)
		}
		if r.Call == "create" {
			creates[r.Allocation]++
		}
	}
	for alloc, n := range creates {
		if n > 1 {
			t.Errorf("allocation %s: %d create POSTs (replay)", alloc, n)
		}
	}
}

// TestCreateDeliversTheBootstrap: Create sends one POST with the
// template, the lease and the four berth_* keys (autoPause off), writes
// the bootstrap file (0600, exact bytes) and Core's CA (0644) through
// envd with their bytes in stdin only, and starts the Runtime tagged
// berth-runtime; GetInfo then sees the Runtime's process (bootstrap
// evidence) and E2B's endAt.
func TestCreateDeliversTheBootstrap(t *testing.T) {
	f := e2btest.Start(t)
	opts := f.Options(t)
	p, err := e2b.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ref := sandboxRef()
	req := contracttest.CreateRequest(ref, sandbox.Resources{})
	req.CoreCA = testCA(t)
	info, err := p.Create(ctxT(t), req)
	if err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	s := only(t, f)
	if s.ID != info.ProviderID || s.Template != e2btest.Template || !s.EndAt.Equal(s.StartedAt.Add(e2b.DefaultLease)) {
		t.Fatalf("sandbox = %+v", s)
	}
	want := e2b.Metadata(opts.InstallationID, ref)
	if len(s.Metadata) != len(want) {
		t.Fatalf("metadata = %v", s.Metadata)
	}
	for k, v := range want {
		if s.Metadata[k] != v {
			t.Fatalf("metadata = %v", s.Metadata)
		}
	}
	encoded, _ := runtimebootstrap.Encode(req.Bootstrap)
	checkFile(t, e2btest.MapPath(s.Dir, runtimebootstrap.Path), 0o600, encoded)
	checkFile(t, e2btest.MapPath(s.Dir, runtimebootstrap.CAPathBeside(runtimebootstrap.Path)), 0o644, req.CoreCA)
	if s.Processes != 1 {
		t.Fatalf("%d processes run in the sandbox, want the Runtime's", s.Processes)
	}
	calls := names(f.Calls())
	wantCalls := []string{"list", "create", "start", "input", "close_stdin", "start", "input", "close_stdin", "start"}
	if !slices.Equal(calls, wantCalls) {
		t.Fatalf("calls = %v, want %v", calls, wantCalls)
	}
	if n, m := f.Connections(), len(f.Requests()); n != m {
		t.Fatalf("%d requests over %d connections: a connection was reused", m, n)
	}
	argv := f.Argv()
	if !slices.Contains(flatten(argv), runtimebootstrap.BinaryPath) {
		t.Fatalf("the Runtime was not started: %v", argv)
	}

	got, err := p.GetInfo(ctxT(t), ref)
	if err != nil || !got.IsSettledRunning(ref) || !got.CreateSettled || !got.LeaseExpiry.Equal(s.EndAt) {
		t.Fatalf("GetInfo = %+v, %v", got, err)
	}
	if _, err := p.Create(ctxT(t), contracttest.CreateRequest(ref, sandbox.Resources{})); !errdefs.IsExists(err) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
	checkNoReplay(t, f)
}

func checkFile(t *testing.T, path string, mode os.FileMode, want []byte) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != mode {
		t.Fatalf("%s: %v, %v (want mode %o)", filepath.Base(path), st, err, mode)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s content differs", filepath.Base(path))
	}
}

func names(calls []contracttest.NativeCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Name
	}
	return out
}

func flatten(argv [][]string) []string {
	var out []string
	for _, a := range argv {
		out = append(out, a...)
	}
	return out
}

// TestRunCommand: an argv without a shell (arguments with spaces and $
// stay literal), stdin bytes and raw output bytes exact (0xff survives),
// stderr apart, the actual exit code, truncation at the limit, the
// working directory.
func TestRunCommand(t *testing.T) {
	f := e2btest.Start(t)
	p := f.Provider(t)
	ref := sandboxRef()
	create(t, p, ref)
	raw := []byte{'h', 'i', 0xff, 0x00, '\n'}
	for _, c := range []struct {
		name string
		cmd  sandbox.Command
		want sandbox.CommandResult
	}{
		{"stdin to stdout", sandbox.Command{Args: []string{"/bin/cat"}, Stdin: raw}, sandbox.CommandResult{Stdout: raw}},
		{"no shell", sandbox.Command{Args: []string{"/bin/echo", "a  b", "$HOME", "; exit 7"}},
			sandbox.CommandResult{Stdout: []byte("a  b $HOME ; exit 7\n")}},
		{"stderr and exit code", sandbox.Command{Args: []string{"/bin/sh", "-c", "printf err >&2; exit 3"}},
			sandbox.CommandResult{Stderr: []byte("err"), ExitCode: 3}},
		{"truncated", sandbox.Command{Args: []string{"/usr/bin/head", "-c", "100000", "/dev/zero"}, OutputLimit: 100},
			sandbox.CommandResult{Stdout: make([]byte, 100), StdoutTruncated: true}},
		{"directory", sandbox.Command{Args: []string{"/bin/pwd"}, Directory: "/workspace"},
			sandbox.CommandResult{Stdout: []byte(e2btest.MapPath(only(t, f).Dir, "/workspace") + "\n")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := p.RunCommand(ctxT(t), ref, c.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Stdout, c.want.Stdout) || !bytes.Equal(got.Stderr, c.want.Stderr) ||
				got.ExitCode != c.want.ExitCode || got.StdoutTruncated != c.want.StdoutTruncated || got.StderrTruncated {
				t.Fatalf("result = %q %q %d %v, want %q %q %d %v", got.Stdout, got.Stderr, got.ExitCode, got.StdoutTruncated,
					c.want.Stdout, c.want.Stderr, c.want.ExitCode, c.want.StdoutTruncated)
			}
		})
	}
	// A command whose output was cut short ("truncated") is ended by the
	// adapter; the fixture counts its process until the process has been
	// reaped, so the count may lag the answer by a moment. A process left
	// running keeps it above one for good.
	deadline := time.Now().Add(5 * time.Second)
	for n := only(t, f).Processes; n != 1; n = only(t, f).Processes {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes left after 5 s, want the Runtime only", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunCommandGivenUpIsKilled: a command whose caller gives up is
// ErrCommandUnconfirmed and its process is SIGKILLed (not left running).
func TestRunCommandGivenUpIsKilled(t *testing.T) {
	f := e2btest.Start(t)
	p := f.Provider(t)
	ref := sandboxRef()
	create(t, p, ref)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		_, err := p.RunCommand(ctx, ref, sandbox.Command{Args: []string{"/bin/sleep", "30"}})
		ran <- err
	}()
	waitFor(t, func() bool { return only(t, f).Processes == 2 })
	cancel()
	if err := <-ran; !errdefs.IsCommandUnconfirmed(err) {
		t.Fatalf("err = %v, want ErrCommandUnconfirmed", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for only(t, f).Processes != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the given-up command still runs: %d processes", only(t, f).Processes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Contains(names(f.Calls()), "signal") {
		t.Fatalf("no SIGKILL sent: %v", names(f.Calls()))
	}
}

// clock is a settable clock for the adapter's settlement rule.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newClocked(t *testing.T, f *e2btest.Fixture) (*e2b.Provider, *clock, e2b.Options) {
	t.Helper()
	c := &clock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	opts := f.Options(t)
	opts.Now = c.Now
	p, err := e2b.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, c, opts
}

func receiptFiles(t *testing.T, opts e2b.Options) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(opts.StateDirectory, "creates"))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestUnknownCreateSettlesOnlyOnEvidence: a create POST without an answer
// leaves the creation unknown (GetInfo: ErrNotFound, no receipt) until
// SettleAfter has passed since the POST began, by the adapter's clock;
// then GetInfo gives the absence receipt and drops the create receipt.
// A committed create whose answer was lost is found by its metadata,
// however late. Nothing is ever created again.
func TestUnknownCreateSettlesOnlyOnEvidence(t *testing.T) {
	f := e2btest.Start(t)
	p, c, opts := newClocked(t, f)

	ref := sandboxRef()
	f.Arm("create", contracttest.FaultTransport, nil)
	if _, err := p.Create(ctxT(t), contracttest.CreateRequest(ref, sandbox.Resources{})); !errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Create = %v", err)
	}
	if receiptFiles(t, opts) != 1 {
		t.Fatal("no create receipt kept for the unknown create")
	}
	for _, step := range []time.Duration{0, e2b.SettleAfter - time.Second} {
		c.Add(step)
		info, err := p.GetInfo(ctxT(t), ref)
		if !errdefs.IsNotFound(err) || info.CreateSettled {
			t.Fatalf("GetInfo before the bound = %+v, %v; want an unsettled ErrNotFound", info, err)
		}
	}
	c.Add(time.Second)
	info, err := p.GetInfo(ctxT(t), ref)
	if err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo past the bound = %+v, %v; want the absence receipt", info, err)
	}
	if receiptFiles(t, opts) != 0 {
		t.Fatal("the create receipt outlived its settlement")
	}

	lost := sandboxRef()
	f.Arm("create", e2btest.FaultLostAnswer, nil)
	if _, err := p.Create(ctxT(t), contracttest.CreateRequest(lost, sandbox.Resources{})); !errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Create = %v", err)
	}
	c.Add(10 * e2b.SettleAfter)
	info, err = p.GetInfo(ctxT(t), lost)
	if err != nil || info.ProviderID == "" || info.State != sandbox.StateRunning || !info.CreateSettled || info.BootstrapComplete {
		t.Fatalf("GetInfo of a lost committed create = %+v, %v", info, err)
	}
	if receiptFiles(t, opts) != 0 {
		t.Fatal("the create receipt outlived the listing that settled it")
	}
	if err := p.Kill(ctxT(t), sandbox.KillRequest{Reference: lost}); err != nil {
		t.Fatal(err)
	}
	checkNoReplay(t, f)
}

// TestCreateAbsenceReceipts: a complete refusal (429, unknown template)
// and a POST that was never written (connection refused after the
// listing) settle absence at once; nothing is left to settle.
func TestCreateAbsenceReceipts(t *testing.T) {
	f := e2btest.Start(t)
	p, _, opts := newClocked(t, f)
	ref := sandboxRef()
	f.Arm("create", e2btest.FaultRateLimit, nil)
	info, err := p.Create(ctxT(t), contracttest.CreateRequest(ref, sandbox.Resources{}))
	if !errdefs.IsFailedPrecondition(err) || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("Create under 429 = %+v, %v", info, err)
	}

	cfg := f.Config(t, f.Key)
	other, err := e2b.Configuration().ResolveChange(cfg, sandbox.ConfigurationInput{Public: []byte(`{"template":"no-such-template"}`)})
	if err != nil {
		t.Fatal(err)
	}
	opts2 := opts
	opts2.Config = other.(e2b.Config)
	p2, err := e2b.New(opts2)
	if err != nil {
		t.Fatal(err)
	}
	ref2 := sandboxRef()
	info, err = p2.Create(ctxT(t), contracttest.CreateRequest(ref2, sandbox.Resources{}))
	if !errdefs.IsInvalid(err) || !info.IsAbsenceReceipt(ref2) {
		t.Fatalf("Create of an unknown template = %+v, %v", info, err)
	}

	proxy := newOneShotProxy(t, f.URL)
	opts3 := opts
	opts3.Config = e2bConfigAt(t, f, proxy.URL())
	p3, err := e2b.New(opts3)
	if err != nil {
		t.Fatal(err)
	}
	ref3 := sandboxRef()
	info, err = p3.Create(ctxT(t), contracttest.CreateRequest(ref3, sandbox.Resources{}))
	if !errdefs.IsFailedPrecondition(err) || !info.IsAbsenceReceipt(ref3) {
		t.Fatalf("Create never written = %+v, %v", info, err)
	}
	if receiptFiles(t, opts) != 0 || len(f.Sandboxes()) != 0 {
		t.Fatalf("receipts %d, sandboxes %d after settled refusals", receiptFiles(t, opts), len(f.Sandboxes()))
	}
	checkNoReplay(t, f)
}

// TestRenewExtendsTheLeaseAndExpiryKills: Renew sets endAt to now plus
// the lease (read back from E2B); a sandbox that is not renewed is
// killed at its endAt (its processes and files gone), and the adapter
// then sees it absent without creating anything.
func TestRenewExtendsTheLeaseAndExpiryKills(t *testing.T) {
	f := e2btest.Start(t)
	p := f.Provider(t)
	kept, lapsed := sandboxRef(), sandboxRef()
	create(t, p, kept)
	create(t, p, lapsed)
	var lapsedDir string
	for _, s := range f.Sandboxes() {
		if s.Metadata[e2b.MetaAllocation] == lapsed.AllocationID {
			lapsedDir = s.Dir
		}
	}
	f.Advance(10 * time.Minute)
	info, err := p.Renew(ctxT(t), kept)
	if err != nil || info.ProviderID == "" || !info.LeaseExpiry.Equal(f.Now().Add(e2b.DefaultLease)) {
		t.Fatalf("Renew = %+v, %v (fixture now %v)", info, err, f.Now())
	}
	f.Advance(10 * time.Minute)
	if _, err := os.Stat(lapsedDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the lapsed sandbox's files remain: %v", err)
	}
	if info, err := p.GetInfo(ctxT(t), kept); err != nil || !info.IsSettledRunning(kept) {
		t.Fatalf("renewed GetInfo = %+v, %v", info, err)
	}
	if info, err := p.GetInfo(ctxT(t), lapsed); err != nil || !info.IsAbsenceReceipt(lapsed) {
		t.Fatalf("lapsed GetInfo = %+v, %v", info, err)
	}
	if _, err := p.Renew(ctxT(t), lapsed); !errdefs.IsNotFound(err) {
		t.Fatalf("Renew of a lapsed sandbox = %v, want ErrNotFound (never revived)", err)
	}
	f.Advance(6 * time.Minute)
	if len(f.Sandboxes()) != 0 {
		t.Fatal("the renewed sandbox outlived its new endAt")
	}
	checkNoReplay(t, f)
}

// TestPausedIsOnlyObserved: a paused sandbox is reported paused by
// GetInfo and Renew with no envd call and no timeout, RunCommand refuses
// it, and nothing resumes it.
func TestPausedIsOnlyObserved(t *testing.T) {
	f := e2btest.Start(t)
	p := f.Provider(t)
	ref := sandboxRef()
	create(t, p, ref)
	f.Pause(only(t, f).ID)
	f.ResetCalls()
	if info, err := p.GetInfo(ctxT(t), ref); err != nil || info.State != sandbox.StatePaused || info.BootstrapComplete {
		t.Fatalf("GetInfo = %+v, %v", info, err)
	}
	if info, err := p.Renew(ctxT(t), ref); err != nil || info.State != sandbox.StatePaused {
		t.Fatalf("Renew = %+v, %v", info, err)
	}
	if _, err := p.RunCommand(ctxT(t), ref, sandbox.Command{Args: []string{"/bin/true"}}); !errdefs.IsNotFound(err) {
		t.Fatalf("RunCommand = %v", err)
	}
	if calls := names(f.Calls()); !slices.Equal(calls, []string{"list", "list", "list"}) {
		t.Fatalf("calls = %v, want listings only", calls)
	}
	if only(t, f).State != "paused" {
		t.Fatal("the sandbox was resumed")
	}
	checkNoReplay(t, f)
}

// TestKillPagesAndRepeats: Kill removes every owned sandbox of the
// allocation across listing pages (150 > E2B's page of 100), leaves a
// foreign one with the same allocation alone, and a repeated Kill of
// the absent allocation succeeds.
func TestKillPagesAndRepeats(t *testing.T) {
	f := e2btest.Start(t)
	p, _, opts := newClocked(t, f)
	ref := sandboxRef()
	for range 150 {
		f.PlantOwned("team-a", e2b.Metadata(opts.InstallationID, ref))
	}
	f.PlantForeign(ref)
	if _, err := p.GetInfo(ctxT(t), ref); !errdefs.IsOwnership(err) {
		t.Fatalf("GetInfo of duplicates = %v, want ErrOwnership", err)
	}
	for range 2 {
		if err := p.Kill(ctxT(t), sandbox.KillRequest{Reference: ref}); err != nil {
			t.Fatalf("Kill = %v", err)
		}
	}
	if len(f.Sandboxes()) != 1 || !f.ForeignIntact() {
		t.Fatalf("after Kill: %d sandboxes, foreign intact %v", len(f.Sandboxes()), f.ForeignIntact())
	}
}
