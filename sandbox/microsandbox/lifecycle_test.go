package microsandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/microsandbox"
	"berth.dev/sandbox/microsandbox/msbtest"
)

// hostRoot is ref's host directory under the node's state directory.
func (fx fixture) hostRoot(ref sandbox.Reference) string {
	return filepath.Join(fx.state, "microsandbox", fx.p.Name(ref))
}

func (fx fixture) callNames() string {
	var names []string
	for _, c := range fx.f.Calls() {
		names = append(names, c.Name)
	}
	return strings.Join(names, " ")
}

// TestFixtureLifecycle checks the happy path: the exact msb calls and argv
// of a clean Create, RunCommand and Kill, the bootstrap file's place and
// mode, and that nothing of ref is left.
func TestFixtureLifecycle(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	req := contracttest.CreateRequest(ref, resources)
	fx.f.ResetCalls()
	info, err := fx.p.Create(ctx, req)
	if err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	if got := fx.callNames(); got != "inspect run inspect" {
		t.Errorf("Create calls = %q", got)
	}
	checkRunArgs(t, fx, ref, req, fx.f.Args()[1])
	checkHostFiles(t, fx, ref, req)

	fx.f.ResetCalls()
	res, err := fx.p.RunCommand(ctx, ref, sandbox.Command{
		Args:  []string{"/bin/sh", "-c", `cat; printf 'to stderr' >&2; exit 3`},
		Stdin: []byte("confidential input"),
	})
	if err != nil || string(res.Stdout) != "confidential input" || string(res.Stderr) != "to stderr" || res.ExitCode != 3 ||
		res.StdoutTruncated || res.StderrTruncated {
		t.Fatalf("RunCommand = %+v, %v", res, err)
	}
	if got := fx.callNames(); got != "inspect exec" {
		t.Errorf("RunCommand calls = %q", got)
	}
	for _, a := range fx.f.Args()[1] {
		if strings.Contains(a, "confidential") {
			t.Errorf("stdin reached argv: %q", a)
		}
	}

	fx.f.ResetCalls()
	if err := fx.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if got := fx.callNames(); got != "inspect list remove list" {
		t.Errorf("Kill calls = %q", got)
	}
	if n := len(fx.f.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes left", n)
	}
	if _, err := os.Lstat(fx.hostRoot(ref)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host directory left: %v", err)
	}
	fx.f.ResetCalls()
	if err := fx.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("repeated Kill: %v", err)
	}
	if got := fx.callNames(); got != "inspect list" {
		t.Errorf("repeated Kill calls = %q", got)
	}
}

// checkRunArgs checks the one create call's argv: the name, the four
// ownership labels, the limits from the request, the pinned image, the
// mounts, the Runtime command, and no credential.
func checkRunArgs(t *testing.T, fx fixture, ref sandbox.Reference, req sandbox.CreateRequest, args []string) {
	t.Helper()
	joined := strings.Join(args, " ")
	root := fx.hostRoot(ref)
	for _, want := range []string{
		"run --detach --name " + fx.p.Name(ref) + " --pull never -q",
		"--label " + microsandbox.LabelAllocation + "=" + ref.AllocationID,
		"--label " + microsandbox.LabelEnvironment + "=" + ref.EnvironmentID,
		"--label " + microsandbox.LabelInstallation + "=" + fx.opts.InstallationID,
		"--label " + microsandbox.LabelTenant + "=" + ref.TenantID,
		"--cpus 2 --memory 300M --root-disk 1024M --user 1000:1000 --workdir /workspace --security restricted",
		"--mount-dir " + root + "/home:/home/runtime:uid=1000,gid=1000",
		"--mount-dir " + root + "/environment:/environment:uid=1000,gid=1000",
		"--mount-dir " + root + "/environment/workspace:/workspace:uid=1000,gid=1000",
		"--no-net --net-rule allow@dns --net-rule allow@domain=core.berth.test:tcp:8443",
		fx.opts.Config.Image + " -- " + strings.Join(microsandbox.RuntimeCommand(), " "),
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("create argv lacks %q:\n%s", want, joined)
		}
	}
	if secret := req.Bootstrap.Credential.Reveal(); strings.Contains(joined, secret) {
		t.Errorf("the credential is in argv")
	}
}

// checkHostFiles checks the bootstrap file (0600) and the CA (0644) in
// the home directory and the environment directories.
func checkHostFiles(t *testing.T, fx fixture, ref sandbox.Reference, req sandbox.CreateRequest) {
	t.Helper()
	home := filepath.Join(fx.hostRoot(ref), "home")
	got, err := runtimebootstrap.ReadFile(filepath.Join(home, filepath.Base(runtimebootstrap.Path)))
	if err != nil || got.DeviceID != req.Bootstrap.DeviceID || got.Credential.Reveal() != req.Bootstrap.Credential.Reveal() {
		t.Errorf("bootstrap file = %+v, %v", got, err)
	}
	for name, mode := range map[string]os.FileMode{
		filepath.Base(runtimebootstrap.Path): 0o600, runtimebootstrap.CAFile: 0o644, ".": 0o700 | os.ModeDir,
	} {
		if fi, err := os.Stat(filepath.Join(home, name)); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v, %v; want mode %v", name, fi.Mode(), err, mode)
		}
	}
	for _, d := range []string{"workspace", "staging", "initialization", "packages"} {
		if fi, err := os.Stat(filepath.Join(fx.hostRoot(ref), "environment", d)); err != nil || !fi.IsDir() {
			t.Errorf("environment directory %s: %v", d, err)
		}
	}
}

// TestRunCommandOutputBounds: each stream keeps its first OutputLimit
// bytes and reports truncation; the exit code is the command's.
func TestRunCommandOutputBounds(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	if _, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources)); err != nil {
		t.Fatal(err)
	}
	res, err := fx.p.RunCommand(ctx, ref, sandbox.Command{
		Args:        []string{"/bin/sh", "-c", `printf 0123456789abcdef; printf ABCDEFGHIJKLMNOP >&2; exit 1`},
		OutputLimit: 10,
	})
	if err != nil || string(res.Stdout) != "0123456789" || string(res.Stderr) != "ABCDEFGHIJ" ||
		!res.StdoutTruncated || !res.StderrTruncated || res.ExitCode != 1 {
		t.Fatalf("RunCommand = %+v, %v", res, err)
	}
	res, err = fx.p.RunCommand(ctx, ref, sandbox.Command{Args: []string{"/nonexistent/program"}})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing program: %+v, %v", res, err)
	}
}

// TestVMExited: a microVM that stopped by itself is observed stopped, and
// RunCommand refuses without an exec (msb's exec would boot it again).
func TestVMExited(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	if _, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources)); err != nil {
		t.Fatal(err)
	}
	fx.f.ExitVM(fx.p.Name(ref))
	fx.f.ResetCalls()
	info, err := fx.p.GetInfo(ctx, ref)
	if err != nil || info.State != sandbox.StateStopped || info.BootstrapComplete || info.CreateSettled {
		t.Fatalf("GetInfo = %+v, %v", info, err)
	}
	if _, err := fx.p.RunCommand(ctx, ref, sandbox.Command{Args: []string{"true"}}); !errdefs.IsRuntimeNotRunning(err) {
		t.Fatalf("RunCommand = %v, want ErrRuntimeNotRunning", err)
	}
	if _, err := fx.p.Observe(ctx, ref); !errdefs.IsRuntimeNotRunning(err) {
		t.Fatalf("Observe = %v, want ErrRuntimeNotRunning", err)
	}
	if got := fx.callNames(); got != "inspect inspect inspect" {
		t.Errorf("calls = %q, want reads only", got)
	}
	if st := fx.f.Sandboxes()[fx.p.Name(ref)].Status; st != "Stopped" {
		t.Errorf("status = %s: something started the exited microVM", st)
	}
}

// TestPartialCleanup: a remove that stopped the microVM but kept its
// record is unconfirmed, and the next Kill finishes the cleanup.
func TestPartialCleanup(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	if _, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources)); err != nil {
		t.Fatal(err)
	}
	fx.f.Arm("remove", contracttest.FaultCleanupFailure, nil)
	if err := fx.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); !errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Kill = %v, want ErrComputeUnconfirmed", err)
	}
	if _, err := os.Lstat(fx.hostRoot(ref)); err != nil {
		t.Errorf("host directory removed before the sandbox: %v", err)
	}
	if err := fx.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if n := len(fx.f.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes left", n)
	}
}

// TestBootFailure is a host where the microVM cannot boot: Create returns
// the Reference, the settled stopped record and ErrRuntimeNotRunning, and
// Kill removes the record and the host directory.
func TestBootFailure(t *testing.T) {
	fx := newFixture(t)
	fx.f.SetBoot(false)
	ctx := context.Background()
	ref := contracttest.NewReference()
	info, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources))
	if !errdefs.IsRuntimeNotRunning(err) || info.Reference != ref || info.State != sandbox.StateStopped ||
		!info.CreateSettled || info.BootstrapComplete || info.ProviderID == "" || info.CheckFor(ref) != nil {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	for _, s := range fx.f.Sensitive() {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error leaks %q: %v", s, err)
		}
	}
	if err := fx.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if n := len(fx.f.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes left", n)
	}
	if _, err := os.Lstat(fx.hostRoot(ref)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host directory left: %v", err)
	}
}

// TestRefusedCreate: msb refuses the create call (exit 1, no record).
// The Create wrote ref's host directory first, so its outcome is unknown
// to the caller (ErrComputeUnconfirmed, no settlement claimed, the class a
// node answers too), never a refusal that touched nothing; Kill then
// finds no sandbox, removes the host directory and confirms.
func TestRefusedCreate(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	fx.f.Arm("run", msbtest.FaultFail, nil)
	info, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources))
	if !errdefs.IsComputeUnconfirmed(err) || info.Reference != ref || info.CreateSettled || info.BootstrapComplete {
		t.Fatalf("Create = %+v, %v; want the Reference, no settlement, ErrComputeUnconfirmed", info, err)
	}
	if n := len(fx.f.Sandboxes()); n != 0 {
		t.Fatalf("msb refused, yet %d sandboxes exist", n)
	}
	if _, err := os.Lstat(fx.hostRoot(ref)); err != nil {
		t.Fatalf("the refused Create's host directory: %v, want it left for Kill", err)
	}
	if err := fx.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, err := os.Lstat(fx.hostRoot(ref)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host directory left after Kill: %v", err)
	}
}

// TestReferenceBound: Kill of one Reference leaves another's sandbox and
// host directory, even of the same Environment; Create never reuses a
// sandbox or a retained host directory.
func TestReferenceBound(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	a := contracttest.NewReference()
	b := a
	b.AllocationID = contracttest.NewReference().AllocationID
	for _, ref := range []sandbox.Reference{a, b} {
		if _, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources)); err != nil {
			t.Fatal(err)
		}
	}
	fx.f.ResetCalls()
	if info, err := fx.p.Create(ctx, contracttest.CreateRequest(a, resources)); !errdefs.IsExists(err) || info.CreateSettled {
		t.Fatalf("second Create = %+v, %v; want ErrExists without settlement", info, err)
	}
	if got := fx.callNames(); got != "inspect" {
		t.Errorf("second Create calls = %q", got)
	}
	if err := fx.p.Kill(ctx, sandbox.KillRequest{Reference: a}); err != nil {
		t.Fatal(err)
	}
	if _, ok := fx.f.Sandboxes()[fx.p.Name(b)]; !ok {
		t.Errorf("Kill of a removed b's sandbox")
	}
	if _, err := os.Lstat(fx.hostRoot(b)); err != nil {
		t.Errorf("Kill of a removed b's host directory: %v", err)
	}
	// a's host directory left behind (here: planted) is never reused.
	if err := os.MkdirAll(fx.hostRoot(a), 0o700); err != nil {
		t.Fatal(err)
	}
	fx.f.ResetCalls()
	if info, err := fx.p.Create(ctx, contracttest.CreateRequest(a, resources)); !errdefs.IsExists(err) || !info.IsAbsenceReceipt(a) {
		t.Fatalf("Create over a retained host directory = %+v, %v", info, err)
	}
	if got := fx.callNames(); slices.Contains(strings.Fields(got), "run") {
		t.Errorf("Create over a retained host directory called %q", got)
	}
}

// TestUnknownCreateSettledByKill: after a create whose answer was lost,
// GetInfo observes the original Reference and Kill removes it.
func TestUnknownCreateSettledByKill(t *testing.T) {
	fx := newFixture(t)
	ref := contracttest.NewReference()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fx.f.Arm("run", contracttest.FaultCancelAfterDispatch, cancel)
	if _, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources)); !errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Create = %v, want ErrComputeUnconfirmed", err)
	}
	bg := context.Background()
	if info, err := fx.p.GetInfo(bg, ref); err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("GetInfo = %+v, %v", info, err)
	}
	if err := fx.p.Kill(bg, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.p.GetInfo(bg, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("GetInfo after Kill = %v, want ErrNotFound", err)
	}
}

// TestObserve reads the usage of a running sandbox.
func TestObserve(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	if _, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources)); err != nil {
		t.Fatal(err)
	}
	obs, err := fx.p.Observe(ctx, ref)
	if err != nil || obs.Reference != ref || obs.CPUUsageNanos == 0 || obs.MemoryLimitBytes != 300<<20 {
		t.Fatalf("Observe = %+v, %v", obs, err)
	}
}

// TestNoSettlementWhileCreating: while this process's create call for ref
// is still running (msb has inserted and booted the record but not
// answered), GetInfo reports what it sees without claiming the creation
// settled; once the call has exited, the same record settles it.
func TestNoSettlementWhileCreating(t *testing.T) {
	fx := newFixture(t)
	ref := contracttest.NewReference()
	dispatched := make(chan struct{})
	fx.f.Arm("run", contracttest.FaultCancelAfterDispatch, func() { close(dispatched) })
	ctx, cancel := context.WithCancel(context.Background())
	created := make(chan error, 1)
	go func() {
		_, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources))
		created <- err
	}()
	<-dispatched
	bg := context.Background()
	info, err := fx.p.GetInfo(bg, ref)
	if err != nil || info.CreateSettled || info.BootstrapComplete {
		t.Errorf("GetInfo while the create call runs = %+v, %v; want no settlement", info, err)
	}
	cancel()
	if err := <-created; !errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Create = %v, want ErrComputeUnconfirmed", err)
	}
	if info, err := fx.p.GetInfo(bg, ref); err != nil || !info.IsSettledRunning(ref) {
		t.Errorf("GetInfo after the create call exited = %+v, %v", info, err)
	}
}

// TestKillDistrustsStaleList: when inspect shows ref's sandbox but the
// label list does not, Kill removes nothing, keeps the host directory and
// reports the outcome unconfirmed.
func TestKillDistrustsStaleList(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	if _, err := fx.p.Create(ctx, contracttest.CreateRequest(ref, resources)); err != nil {
		t.Fatal(err)
	}
	fx.f.Arm("list", msbtest.FaultEmpty, nil)
	fx.f.ResetCalls()
	if err := fx.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); !errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Kill = %v, want ErrComputeUnconfirmed", err)
	}
	if got := fx.callNames(); got != "inspect list" {
		t.Errorf("calls = %q", got)
	}
	if _, ok := fx.f.Sandboxes()[fx.p.Name(ref)]; !ok {
		t.Errorf("the sandbox is gone")
	}
	if _, err := os.Lstat(fx.hostRoot(ref)); err != nil {
		t.Errorf("the host directory went before the sandbox: %v", err)
	}
}

// TestStateDirectoryChecked: without a usable state directory Create and
// Kill refuse before any msb call.
func TestStateDirectoryChecked(t *testing.T) {
	fx := newFixture(t)
	for _, dir := range []string{"", "relative", "/a:b", "/a,b", "/a/../b"} {
		opts := fx.opts
		opts.StateDirectory = dir
		p := microsandbox.New(fx.f.Runner(), opts)
		ref := contracttest.NewReference()
		fx.f.ResetCalls()
		if _, err := p.Create(context.Background(), contracttest.CreateRequest(ref, resources)); !errdefs.IsInvalid(err) {
			t.Errorf("Create with state directory %q = %v, want ErrInvalid", dir, err)
		}
		if err := p.Kill(context.Background(), sandbox.KillRequest{Reference: ref}); !errdefs.IsInvalid(err) {
			t.Errorf("Kill with state directory %q = %v, want ErrInvalid", dir, err)
		}
		if got := fx.callNames(); got != "" {
			t.Errorf("state directory %q: msb calls %q", dir, got)
		}
	}
}
