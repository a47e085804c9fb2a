package microsandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/microsandbox"
	"berth.dev/sandbox/testenv"
)

// The native acceptance suite runs the adapter against the real, pinned
// msb and boots real microVMs from the runtime image archive (make
// check-microsandbox-provider). Its gate:
//
//   - BERTH_TEST_MICROSANDBOX unset, CI not true: skipped, saying why (it
//     needs a host with hardware virtualization).
//   - BERTH_TEST_MICROSANDBOX=1: the whole suite runs; on a host that
//     cannot boot a microVM it fails with the probe's diagnostic.
//   - CI=true without BERTH_TEST_MICROSANDBOX: never skipped. On a host
//     with hardware virtualization the whole suite runs; on one without,
//     the test checks that the probe refuses with exactly the diagnostic
//     this host calls for (read here from /dev/kvm and /proc/cpuinfo) and
//     logs that the native part did not run. CI's hosts have no VT-x.
//
// On a host that cannot boot, what msb does without a microVM still runs
// for real first (CreateWhereNoMicroVMBoots: the failed boot leaves a
// stopped record; Create must not claim it, Kill must remove it all).
//
// The suite is written against the adapter's public API and the contract
// interfaces (sandbox.SandboxProvider, sandbox.CheckpointProvider, the
// probe), so it compiles whatever the adapter has implemented so far and
// fails, naming what is missing, when an operation does not exist.

// Environment of the native suite.
const (
	NativeEnv = "BERTH_TEST_MICROSANDBOX"
	// MSBEnv names the pinned msb executable (libkrunfw in ../lib).
	MSBEnv = "BERTH_TEST_MSB"
	// ImageArchiveEnv names a runtime image archive built by
	// scripts/build-runtime-image --output; unset, the suite builds one.
	ImageArchiveEnv = "BERTH_TEST_MSB_IMAGE"
	// ImageDigestEnv is the digest build-runtime-image printed for it
	// (BERTH_RUNTIME_IMAGE_MSB_DIGEST, as the .msb-digest file of a
	// release holds it); set, msb must report exactly it. When the suite
	// builds the archive itself it takes the digest the script prints.
	ImageDigestEnv = "BERTH_TEST_MSB_IMAGE_DIGEST"
)

// nativeImage is the local reference the suite loads the archive under.
const nativeImage = "berth-runtime:acceptance"

// nativeResources are two vCPUs, so the count seen inside tells a limit
// from a default of one.
var nativeResources = sandbox.Resources{CPUMillis: 2000, MemoryBytes: 512 << 20, DiskBytes: 2 << 30}

type prober interface {
	Probe(ctx context.Context) error
}

// native is one adapter instance over a private MSB_HOME and state
// directory, its installation fresh.
type native struct {
	t            *testing.T
	msbPath      string
	home         string
	state        string
	installation string
	digest       string
	p            *microsandbox.Provider
	sp           sandbox.SandboxProvider
}

func TestAcceptanceNative(t *testing.T) {
	n, optedIn := newNative(t)
	if cannot := n.probe(t); cannot != "" {
		// What msb does here without booting still runs for real.
		t.Run("CreateWhereNoMicroVMBoots", n.checkCannotBoot)
		if optedIn {
			t.Fatalf("%s=1, but this host cannot boot a microVM: the probe reports %q", NativeEnv, cannot)
		}
		t.Logf("CI=true, %s unset: this host cannot boot a microVM and the probe says so (%q); "+
			"the native part did not run (make check-microsandbox-provider on a host with VT-x/AMD-V runs it)", NativeEnv, cannot)
		return
	}
	ref := contracttest.NewReference()
	var hostFile string
	if !t.Run("Create", func(t *testing.T) { n.checkCreate(t, ref) }) {
		t.Fatal("Create failed: nothing else can run")
	}
	t.Run("Inside", func(t *testing.T) { n.checkInside(t, ref) })
	t.Run("HostIsolation", func(t *testing.T) { n.checkIsolation(t, ref) })
	t.Run("WorkspaceOnTheHost", func(t *testing.T) { hostFile = n.checkWorkspace(t, ref) })
	t.Run("RunCommand", func(t *testing.T) { n.checkRunCommand(t, ref) })
	t.Run("Kill", func(t *testing.T) { n.checkKill(t, ref, hostFile) })
	t.Run("CheckpointRoundTrip", n.checkCheckpoint)
}

// newNative applies the suite's gate, loads the runtime image into a
// private MSB_HOME and returns the adapter over it, and whether the suite
// was opted into.
func newNative(t *testing.T) (*native, bool) {
	t.Helper()
	testenv.SkipShort(t, "the real msb and a host with hardware virtualization")
	optedIn := os.Getenv(NativeEnv) == "1"
	if !optedIn && !testenv.InCI() {
		t.Skipf("%s is not 1: skipping the native microsandbox suite, which boots microVMs and needs a host "+
			"with hardware virtualization (vmx/svm) and /dev/kvm; run make check-microsandbox-provider there", NativeEnv)
	}
	msb := os.Getenv(MSBEnv)
	if msb == "" {
		t.Fatalf("%s is not set: the native suite needs the pinned msb %s (scripts/test-services up provides it)",
			MSBEnv, microsandbox.PinnedVersion)
	}
	n := &native{t: t, msbPath: msb, home: t.TempDir(), state: t.TempDir(), installation: uuid.NewString()}
	if out := strings.TrimSpace(string(n.msbOK(t, "--version"))); out != "msb "+microsandbox.PinnedVersion {
		t.Fatalf("%s is %q; want msb %s", msb, out, microsandbox.PinnedVersion)
	}
	n.digest = n.loadImage(t)
	cfg := microsandbox.NodeConfig{MSB: msb, Home: n.home, Image: nativeImage, ImageDigest: n.digest, Network: "none"}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("node configuration: %v", err)
	}
	n.p = microsandbox.New(microsandbox.Exec{Path: msb, Home: n.home}, microsandbox.Options{
		InstallationID: n.installation, Config: cfg, Resources: nativeResources, StateDirectory: n.state,
	})
	t.Cleanup(n.sweep)
	sp, ok := any(n.p).(sandbox.SandboxProvider)
	if !ok {
		t.Fatal("*microsandbox.Provider does not implement sandbox.SandboxProvider yet")
	}
	n.sp = sp
	return n, optedIn
}

// hostCannotBoot returns the probe code this host calls for, read from
// the host itself, or "" when it has /dev/kvm and vmx or svm.
func hostCannotBoot(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return microsandbox.ProbeNoKVM
	}
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(cpuinfo)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			if f := strings.Fields(v); slices.Contains(f, "vmx") || slices.Contains(f, "svm") {
				return ""
			}
		}
	}
	return microsandbox.ProbeNoVirtualization
}

// probe runs the adapter's probe: on a host that can boot microVMs it
// must pass; on one that cannot, it must report exactly the diagnostic the
// host calls for, which it returns.
func (n *native) probe(t *testing.T) string {
	t.Helper()
	pr, ok := any(n.p).(prober)
	if !ok {
		t.Fatal("*microsandbox.Provider has no Probe yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := pr.Probe(ctx)
	code, want := sandbox.ProbeCode(err), hostCannotBoot(t)
	switch {
	case want == "" && err != nil:
		t.Fatalf("probe on a host that can boot microVMs: %v (code %q)", err, code)
	case code != want:
		t.Fatalf("probe on a host without %s: %v (code %q); want the diagnostic %q", map[string]string{
			microsandbox.ProbeNoKVM: "/dev/kvm", microsandbox.ProbeNoVirtualization: "hardware virtualization",
		}[want], err, code, want)
	}
	return want
}

// checkCannotBoot runs Create with the real msb on a host where the
// microVM cannot boot (msb leaves a stopped record behind): Create fails
// without claiming a running sandbox or passing msb's text on, and Kill
// then leaves nothing: no sandbox of the installation, no file (the
// bootstrap credential among them) below the state directory.
func (n *native) checkCannotBoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	info, err := n.sp.Create(ctx, contracttest.CreateRequest(ref, nativeResources))
	if err == nil || info.IsSettledRunning(ref) || info.CheckFor(ref) != nil {
		t.Fatalf("Create where no microVM boots = %+v, %v; want an error and no running sandbox", info, err)
	}
	t.Logf("Create where no microVM boots: %+v, %v", info, err)
	for _, native := range []string{"agent relay", "exit status", n.p.Name(ref), n.home, n.state, "msb logs"} {
		if strings.Contains(err.Error(), native) {
			t.Errorf("Create's error %q carries msb's text or a native name or path (%q)", err, native)
		}
	}
	for range 2 {
		if err := n.sp.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
			t.Fatalf("Kill after the failed Create: %v", err)
		}
	}
	if left := n.owned(t); len(left) != 0 {
		t.Errorf("after Kill msb still lists %d sandboxes of the installation", len(left))
	}
	if files := regularFiles(t, n.state); len(files) != 0 {
		t.Errorf("after Kill %d files are left below the state directory: %q", len(files), files)
	}
	if _, err := n.sp.GetInfo(ctx, ref); !errdefs.IsNotFound(err) {
		t.Errorf("GetInfo after Kill: %v; want not found", err)
	}
}

// regularFiles lists the regular files below dir.
func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return files
}

// loadImage loads the runtime image archive into the private MSB_HOME as
// nativeImage and returns the digest msb reports for it.
func (n *native) loadImage(t *testing.T) string {
	t.Helper()
	archive, want := os.Getenv(ImageArchiveEnv), os.Getenv(ImageDigestEnv)
	if archive == "" {
		if os.Geteuid() != 0 {
			t.Fatalf("%s is not set and building the runtime image archive needs root", ImageArchiveEnv)
		}
		archive = filepath.Join(t.TempDir(), "berth-runtime-image.tar")
		_, file, _, _ := runtime.Caller(0)
		c := exec.Command(filepath.Join(filepath.Dir(file), "..", "..", "scripts", "build-runtime-image"), "--output", archive)
		c.Env = append(os.Environ(), "BERTH_RUNTIME_TAG=acceptance")
		out, err := c.Output()
		if err != nil {
			t.Fatalf("scripts/build-runtime-image --output: %v", err)
		}
		for line := range strings.Lines(string(out)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "BERTH_RUNTIME_IMAGE_MSB_DIGEST="); ok {
				want = v
			}
		}
	}
	n.msbOK(t, "load", "-q", "-i", archive, "-t", nativeImage)
	var img struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(n.msbOK(t, "image", "inspect", nativeImage, "--format", "json"), &img); err != nil {
		t.Fatalf("msb image inspect: %v", err)
	}
	if want != "" && img.Digest != want {
		t.Fatalf("msb loaded the archive as %s; its digest by build-runtime-image (or %s) is %s", img.Digest, ImageDigestEnv, want)
	}
	return img.Digest
}

// msb runs the real msb on the suite's MSB_HOME (the adapter's own runner,
// so the test reads msb exactly as the adapter does).
func (n *native) msb(args ...string) (microsandbox.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return microsandbox.Exec{Path: n.msbPath, Home: n.home}.Run(ctx, microsandbox.Invocation{Args: args})
}

// msbOK runs msb and returns its standard output; any failure fails t.
func (n *native) msbOK(t testing.TB, args ...string) []byte {
	t.Helper()
	res, err := n.msb(args...)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("msb %q: %v, exit %d: %s", args, err, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// owned lists the names of the msb sandboxes carrying this installation's
// label.
func (n *native) owned(t testing.TB) []string {
	t.Helper()
	var list []struct {
		Name string `json:"name"`
	}
	out := n.msbOK(t, "list", "--label", microsandbox.LabelInstallation+"="+n.installation, "--format", "json")
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("msb list: %v", err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	return names
}

// sweep removes every sandbox of this installation the test left and
// fails the test if there was any: a passing run leaks nothing.
func (n *native) sweep() {
	left := n.owned(n.t)
	for _, name := range left {
		_, _ = n.msb("stop", name)
		_, _ = n.msb("remove", name)
	}
	if len(left) > 0 {
		n.t.Errorf("the test left %d msb sandboxes behind", len(left))
	}
	if snaps := n.snapshots(n.t); len(snaps) > 0 {
		n.t.Errorf("the test left %d msb snapshots behind", len(snaps))
	}
}

// inspected is the part of `msb inspect --format json` the suite reads.
type inspected struct {
	Status string `json:"status"`
	Config struct {
		Labels         map[string]string `json:"labels"`
		ManifestDigest string            `json:"manifest_digest"`
		Resources      struct {
			CPUs      int   `json:"cpus"`
			MemoryMiB int64 `json:"memory_mib"`
		} `json:"resources"`
		Image struct {
			OCI struct {
				RootDisk struct {
					SizeMiB int64 `json:"size_mib"`
				} `json:"root_disk"`
			} `json:"Oci"`
		} `json:"image"`
		Mounts []inspectedMount `json:"mounts"`
	} `json:"config"`
}

type inspectedMount struct {
	Type     string `json:"type"`
	Host     string `json:"host"`
	Guest    string `json:"guest"`
	QuotaMiB *int64 `json:"quota_mib"`
}

func (n *native) inspect(t *testing.T, ref sandbox.Reference) inspected {
	t.Helper()
	var in inspected
	if err := json.Unmarshal(n.msbOK(t, "inspect", n.p.Name(ref), "--format", "json"), &in); err != nil {
		t.Fatalf("msb inspect: %v", err)
	}
	return in
}

func nativeSh(script string) sandbox.Command {
	return sandbox.Command{Args: []string{"/bin/sh", "-c", script}}
}

func (n *native) run(t *testing.T, ref sandbox.Reference, cmd sandbox.Command) sandbox.CommandResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := n.sp.RunCommand(ctx, ref, cmd)
	if err != nil {
		t.Fatalf("RunCommand %q: %v", cmd.Args, err)
	}
	return res
}

// checkCreate creates ref's sandbox and reads back from msb what the
// adapter asked for: the ownership labels, the pinned image, the limits.
func (n *native) checkCreate(t *testing.T, ref sandbox.Reference) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	info, err := n.sp.Create(ctx, contracttest.CreateRequest(ref, nativeResources))
	if err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	in := n.inspect(t, ref)
	for k, v := range n.p.Labels(ref) {
		if in.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, in.Config.Labels[k], v)
		}
	}
	quota := in.Config.Image.OCI.RootDisk.SizeMiB == nativeResources.DiskBytes>>20 ||
		slices.ContainsFunc(in.Config.Mounts, func(m inspectedMount) bool {
			return m.QuotaMiB != nil && *m.QuotaMiB == nativeResources.DiskBytes>>20
		})
	checks := map[string]bool{
		"running":                 in.Status == "Running",
		"the pinned image":        in.Config.ManifestDigest == n.digest,
		"vCPUs from cpu_millis":   in.Config.Resources.CPUs == int(nativeResources.CPUMillis/1000),
		"memory from the request": in.Config.Resources.MemoryMiB == nativeResources.MemoryBytes>>20,
		"disk from the request":   quota,
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("not applied: %s (msb inspect: %+v)", name, in)
		}
	}
	if _, err := n.sp.Create(ctx, contracttest.CreateRequest(ref, nativeResources)); !errdefs.IsExists(err) {
		t.Errorf("a second Create of the same Reference: %v; want ErrExists", err)
	}
}

// checkInside reads the sandbox from inside: the Runtime's user, the
// bootstrap file's path and mode, the vCPUs and memory the guest kernel
// sees, a kernel of its own, and the Runtime process.
func (n *native) checkInside(t *testing.T, ref sandbox.Reference) {
	out := n.run(t, ref, nativeSh(`busybox stat -c '%a %u %g' `+runtimebootstrap.Path+`; id -u; id -g;
		grep -c ^processor /proc/cpuinfo; sed -n 's/^MemTotal: *\([0-9]*\) kB$/\1/p' /proc/meminfo; uname -r;
		ps -o comm | grep -c berth-runtime`))
	lines := strings.Split(strings.TrimSpace(string(out.Stdout)), "\n")
	if out.ExitCode != 0 || len(lines) != 7 {
		t.Fatalf("inside: %q (stderr %q, exit %d)", out.Stdout, out.Stderr, out.ExitCode)
	}
	if lines[0] != "600 1000 1000" || lines[1] != "1000" || lines[2] != "1000" {
		t.Errorf("bootstrap file %q, uid %s, gid %s; want 600 1000 1000 owned by the Runtime's user 1000:1000", lines[0], lines[1], lines[2])
	}
	if lines[3] != strconv.FormatInt(nativeResources.CPUMillis/1000, 10) {
		t.Errorf("the guest sees %s CPUs; want %d", lines[3], nativeResources.CPUMillis/1000)
	}
	memKiB, err := strconv.ParseInt(lines[4], 10, 64)
	if limit := nativeResources.MemoryBytes >> 10; err != nil || memKiB > limit || memKiB < limit/2 {
		t.Errorf("the guest's MemTotal is %s kB; want at most the limit %d kB and more than half of it", lines[4], limit)
	}
	var host syscall.Utsname
	if err := syscall.Uname(&host); err != nil {
		t.Fatal(err)
	}
	if lines[5] == utsString(host.Release[:]) {
		t.Errorf("the guest runs the host's kernel %s: not a microVM", lines[5])
	}
	if lines[6] != "1" {
		t.Errorf("%s berth-runtime processes run; want 1", lines[6])
	}
}

func utsString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// checkIsolation: every host directory shared into the microVM is below
// the node's state directory, and a file elsewhere on the host is not
// visible inside.
func (n *native) checkIsolation(t *testing.T, ref sandbox.Reference) {
	for _, m := range n.inspect(t, ref).Config.Mounts {
		if m.Host == "" {
			continue
		}
		if rel, err := filepath.Rel(n.state, m.Host); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Errorf("the host directory %s is shared at %s: outside the node's state directory", m.Host, m.Guest)
		}
	}
	sentinel := filepath.Join(t.TempDir(), "host-only-"+uuid.NewString())
	if err := os.WriteFile(sentinel, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := n.run(t, ref, sandbox.Command{Args: []string{"/bin/sh", "-c", `test -e "$0" && echo visible || echo absent`, sentinel}})
	if strings.TrimSpace(string(out.Stdout)) != "absent" {
		t.Errorf("a host file outside the workspace is visible inside: %q", out.Stdout)
	}
}

// checkWorkspace writes a file in the workspace from inside and finds it
// on the host below the node's state directory; it returns its host path.
func (n *native) checkWorkspace(t *testing.T, ref sandbox.Reference) string {
	name, content := "persisted-"+uuid.NewString(), uuid.NewString()
	out := n.run(t, ref, sandbox.Command{Args: []string{"/bin/sh", "-c", `printf %s "$1" > "/workspace/$0"`, name, content}})
	if out.ExitCode != 0 {
		t.Fatalf("write in /workspace: %q %q", out.Stdout, out.Stderr)
	}
	found := findFile(t, n.state, name)
	if len(found) != 1 {
		t.Fatalf("the workspace file is %d times below the state directory %s; want once", len(found), n.state)
	}
	if got, err := os.ReadFile(found[0]); err != nil || string(got) != content {
		t.Fatalf("the workspace file on the host holds %q (%v)", got, err)
	}
	return found[0]
}

// findFile lists the files named name below dir.
func findFile(t *testing.T, dir, name string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == name && d.Type().IsRegular() {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return found
}

// checkRunCommand: the streams and exit code, stdin outside argv, bounded
// output, a cancelled command unconfirmed.
func (n *native) checkRunCommand(t *testing.T, ref sandbox.Reference) {
	out := n.run(t, ref, nativeSh(`printf 'out1\n'; printf 'err1\n' >&2; printf 'out2'; exit 7`))
	if string(out.Stdout) != "out1\nout2" || string(out.Stderr) != "err1\n" || out.ExitCode != 7 {
		t.Errorf("streams = %q / %q / %d", out.Stdout, out.Stderr, out.ExitCode)
	}
	secret := []byte("token-\x00\x01\xff-" + uuid.NewString())
	if out = n.run(t, ref, sandbox.Command{Args: []string{"cat"}, Stdin: secret}); !bytes.Equal(out.Stdout, secret) {
		t.Errorf("stdin round trip = %q", out.Stdout)
	}
	out = n.run(t, ref, sandbox.Command{Args: []string{"sh", "-c", "dd if=/dev/zero bs=65536 count=64 2>/dev/null"}, OutputLimit: 1 << 20})
	if len(out.Stdout) != 1<<20 || !out.StdoutTruncated || out.ExitCode != 0 {
		t.Errorf("bounded output: %d bytes, truncated %v, exit %d", len(out.Stdout), out.StdoutTruncated, out.ExitCode)
	}
	if out = n.run(t, ref, sandbox.Command{Args: []string{"pwd"}, Directory: "/environment"}); string(out.Stdout) != "/environment\n" {
		t.Errorf("directory: %q %q", out.Stdout, out.Stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	if _, err := n.sp.RunCommand(ctx, ref, nativeSh("sleep 30")); !errdefs.IsCommandUnconfirmed(err) {
		t.Errorf("cancelled RunCommand: %v; want ErrCommandUnconfirmed", err)
	}
}

// checkKill: Kill leaves no sandbox of the installation and no workspace
// on the host; GetInfo then finds nothing; a repeated Kill succeeds.
func (n *native) checkKill(t *testing.T, ref sandbox.Reference, hostFile string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for range 2 {
		if err := n.sp.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		if left := n.owned(t); len(left) != 0 {
			t.Fatalf("after Kill msb still lists %d sandboxes of the installation", len(left))
		}
	}
	if hostFile != "" {
		if _, err := os.Stat(filepath.Dir(hostFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after Kill the workspace %s is still on the host (%v)", filepath.Dir(hostFile), err)
		}
	}
	info, err := n.sp.GetInfo(ctx, ref)
	if !errdefs.IsNotFound(err) && (err != nil || !info.IsAbsenceReceipt(ref)) {
		t.Errorf("GetInfo after Kill = %+v, %v; want not found or the absence receipt", info, err)
	}
}

// checkCheckpoint: a round trip through msb snapshots when the adapter
// declares checkpoints: Suspend captures once per operation (a repeat and
// an ObserveOnly read return the same snapshot), Resume restores the
// workspace into a new incarnation with a fresh bootstrap file, and
// DeleteSnapshot and KillCompute remove exactly what they name.
func (n *native) checkCheckpoint(t *testing.T) {
	if err := n.p.ProviderOperations().Check(sandbox.OpSuspend); err != nil {
		t.Skipf("the adapter declares checkpoints unsupported: %v", err)
	}
	cp, ok := any(n.p).(sandbox.CheckpointProvider)
	if !ok {
		t.Fatal("the adapter declares checkpoints but does not implement sandbox.CheckpointProvider")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	defer func() { _ = n.sp.Kill(ctx, sandbox.KillRequest{Reference: ref}) }()
	if info, err := n.sp.Create(ctx, contracttest.CreateRequest(ref, nativeResources)); err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	first, err := cp.Initial(ref)
	if err != nil {
		t.Fatal(err)
	}
	content := uuid.NewString()
	n.run(t, ref, sandbox.Command{Args: []string{"/bin/sh", "-c", `printf %s "$0" > /workspace/kept`, content}})
	before := n.snapshots(t)
	op := uuid.NewString()
	res, err := cp.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: op})
	if err != nil || res.Snapshot.ID == "" || res.Source.State != sandbox.ComputeAbsent {
		t.Fatalf("Suspend = %+v, %v", res, err)
	}
	for _, observeOnly := range []bool{false, true} {
		again, err := cp.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: op, ObserveOnly: observeOnly})
		if err != nil || again.Snapshot != res.Snapshot {
			t.Fatalf("Suspend again (ObserveOnly %v) = %+v, %v; want %+v", observeOnly, again, err, res.Snapshot)
		}
	}
	second, err := cp.NewCompute(first)
	if err != nil {
		t.Fatal(err)
	}
	fresh := contracttest.CreateRequest(ref, nativeResources).Bootstrap
	resumed, err := cp.Resume(ctx, sandbox.ResumeRequest{
		Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(), Resources: nativeResources, Bootstrap: fresh,
	})
	if err != nil || resumed.Compute.State != sandbox.ComputeRunning {
		t.Fatalf("Resume = %+v, %v", resumed, err)
	}
	second = resumed.Compute.Compute
	want, err := runtimebootstrap.Encode(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cp.RunCommandCompute(ctx, second, nativeSh(`cat /workspace/kept; echo; cat `+runtimebootstrap.Path))
	if err != nil || string(got.Stdout) != content+"\n"+string(want) {
		t.Fatalf("the restored incarnation holds %q (%v); want the workspace file and the fresh bootstrap file", got.Stdout, err)
	}
	for range 2 {
		if err := cp.DeleteSnapshot(ctx, ref, res.Snapshot); err != nil {
			t.Fatalf("DeleteSnapshot: %v", err)
		}
		if err := cp.KillCompute(ctx, second); err != nil {
			t.Fatalf("KillCompute: %v", err)
		}
	}
	if after := n.snapshots(t); !slices.Equal(after, before) {
		t.Errorf("msb lists the snapshots %q after DeleteSnapshot; before Suspend it listed %q", after, before)
	}
}

// snapshots lists the digests of the snapshots msb knows in the suite's
// private MSB_HOME, sorted: all of them are the suite's.
func (n *native) snapshots(t testing.TB) []string {
	t.Helper()
	var list []struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(n.msbOK(t, "snapshot", "list", "--format", "json"), &list); err != nil {
		t.Fatalf("msb snapshot list: %v", err)
	}
	var digests []string
	for _, s := range list {
		digests = append(digests, s.Digest)
	}
	slices.Sort(digests)
	return digests
}
