package docker_test

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/testenv"
)

// These tests run the adapter against the real Docker Engine that
// scripts/test-services provides, with the real runtime image.

type engine struct {
	t            testing.TB
	host         string
	cli          *client.Client
	p            *docker.Provider
	installation string
	image        string
}

func seccompProfilePath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "runtime", "seccomp.json")
}

func newEngine(t testing.TB, nested bool) *engine {
	t.Helper()
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	cli, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	profile, err := docker.LoadSeccompProfile(seccompProfilePath())
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{t: t, host: host, cli: cli, installation: uuid.NewString(), image: image}
	installations.Store(e.installation, true)
	e.p = docker.New(cli, docker.Options{
		InstallationID: e.installation,
		Config: docker.NodeConfig{
			Socket: "/unused", Image: image, Network: "none",
			ExtraHosts:     []string{"core.berth.test:127.0.0.1"},
			SeccompProfile: "/unused", NestedSandbox: nested,
		},
		Seccomp:         profile,
		Resources:       resources,
		IntentDirectory: t.TempDir(),
	})
	t.Cleanup(e.sweep)
	return e
}

var resources = sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}

// owned lists the containers and volumes carrying this test's installation
// label.
func (e *engine) owned() (containers, volumes []string) {
	return e.labelled(client.Filters{}.Add("label", docker.LabelInstallation+"="+e.installation))
}

// tombstones lists the containers and volumes carrying this test's
// installation label and the tombstone label.
func (e *engine) tombstones() (containers, volumes []string) {
	return e.labelled(client.Filters{}.Add("label", docker.LabelInstallation+"="+e.installation).Add("label", docker.LabelTombstone+"=1"))
}

// labelled lists the containers, stopped ones included, and the volumes
// that match the label filters f.
func (e *engine) labelled(f client.Filters) (containers, volumes []string) {
	ctx := context.Background()
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		e.t.Fatalf("list containers: %v", err)
	}
	for _, c := range cs.Items {
		containers = append(containers, c.ID)
	}
	vs, err := e.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		e.t.Fatalf("list volumes: %v", err)
	}
	for _, v := range vs.Items {
		volumes = append(volumes, v.Name)
	}
	return containers, volumes
}

// sweep removes whatever a test left behind, tombstones included (Kill
// leaves them on purpose), and fails the test if anything else was left: a
// passing test leaks nothing but tombstones.
func (e *engine) sweep() {
	tombs, tombVols := e.tombstones()
	containers, volumes := e.owned()
	ctx := context.Background()
	for _, id := range containers {
		_, _ = e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	}
	for _, v := range volumes {
		_, _ = e.cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{Force: true})
	}
	if c, v := len(containers)-len(tombs), len(volumes)-len(tombVols); c+v > 0 {
		e.t.Errorf("test left %d containers and %d volumes behind", c, v)
	}
}

func (e *engine) create(ref sandbox.Reference) sandbox.Info {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := e.p.Create(ctx, contracttest.CreateRequest(ref, resources))
	if err != nil {
		e.t.Fatalf("Create: %v", err)
	}
	return info
}

func (e *engine) kill(ref sandbox.Reference) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		e.t.Fatalf("Kill: %v", err)
	}
}

func (e *engine) run(ref sandbox.Reference, cmd sandbox.Command) sandbox.CommandResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.p.RunCommand(ctx, ref, cmd)
	if err != nil {
		e.t.Fatalf("RunCommand %q: %v", cmd.Args, err)
	}
	return res
}

func sh(script string) sandbox.Command {
	return sandbox.Command{Args: []string{"/bin/sh", "-c", script}}
}

func TestAcceptanceCreateAppliesEverySetting(t *testing.T) {
	e := newEngine(t, false)
	ref := contracttest.NewReference()
	info := e.create(ref)
	if !info.IsSettledRunning(ref) {
		t.Fatalf("Create = %+v", info)
	}
	ctx := context.Background()
	c, err := e.cli.ContainerInspect(ctx, info.ProviderID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ct, hc := c.Container, c.Container.HostConfig
	labels := map[string]string{
		docker.LabelInstallation: e.installation, docker.LabelTenant: ref.TenantID,
		docker.LabelEnvironment: ref.EnvironmentID, docker.LabelAllocation: ref.AllocationID,
	}
	for k, v := range labels {
		if ct.Config.Labels[k] != v {
			t.Errorf("container label %s = %q, want %q", k, ct.Config.Labels[k], v)
		}
	}
	checks := map[string]bool{
		"user 1000:1000":           ct.Config.User == "1000:1000",
		"exact image":              ct.Image == e.image,
		"runtime command":          slices.Equal(append([]string{ct.Path}, ct.Args...), docker.RuntimeCommand()),
		"read-only root":           hc.ReadonlyRootfs,
		"all capabilities dropped": slices.Equal(hc.CapDrop, []string{"ALL"}) && len(hc.CapAdd) == 0,
		"no-new-privileges":        slices.Contains(hc.SecurityOpt, "no-new-privileges:true"),
		"apparmor unconfined":      slices.Contains(hc.SecurityOpt, "apparmor=unconfined"),
		"seccomp profile":          slices.ContainsFunc(hc.SecurityOpt, func(s string) bool { return strings.HasPrefix(s, "seccomp={") }),
		"network none":             hc.NetworkMode == "none",
		"extra hosts":              slices.Equal(hc.ExtraHosts, []string{"core.berth.test:127.0.0.1"}),
		"cpu":                      hc.NanoCPUs == resources.CPUMillis*1_000_000,
		"memory":                   hc.Memory == resources.MemoryBytes,
		"pids 128":                 hc.PidsLimit != nil && *hc.PidsLimit == 128,
		"tmp tmpfs 128m":           strings.Contains(hc.Tmpfs["/tmp"], "size=128m"),
		"not privileged":           !hc.Privileged,
		"no init":                  hc.Init == nil || !*hc.Init,
		"default masks kept":       len(hc.MaskedPaths) == 0 || slices.Contains(hc.MaskedPaths, "/proc/kcore"),
		"running":                  ct.State.Running,
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("setting not applied: %s", name)
		}
	}
	mounts := map[string]mount.Mount{}
	for _, m := range hc.Mounts {
		mounts[m.Target] = m
	}
	home, env := e.p.HomeVolume(ref), e.p.EnvironmentVolume(ref)
	if m := mounts["/home"]; m.Type != mount.TypeVolume || m.Source != home {
		t.Errorf("/home mount = %+v", m)
	}
	if m := mounts["/environment"]; m.Type != mount.TypeVolume || m.Source != env {
		t.Errorf("/environment mount = %+v", m)
	}
	if m := mounts["/workspace"]; m.Type != mount.TypeVolume || m.Source != env || m.VolumeOptions == nil || m.VolumeOptions.Subpath != "workspace" {
		t.Errorf("/workspace mount = %+v", m)
	}
	for _, name := range []string{home, env} {
		v, err := e.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
		if err != nil {
			t.Fatalf("volume %s: %v", name, err)
		}
		for k, want := range labels {
			if v.Volume.Labels[k] != want {
				t.Errorf("volume %s label %s = %q", name, k, v.Volume.Labels[k])
			}
		}
	}

	// Inside: the bootstrap file's mode and owner, the user, the read-only
	// root, the writable /tmp, and the workspace subpath shared with
	// /environment.
	out := e.run(ref, sh(`busybox stat -c '%a %u %g' /home/runtime/runtime-bootstrap.json; id -u; id -g;
		touch /rootfs-write 2>/dev/null && echo rw || echo ro; echo t > /tmp/t && echo tmp-ok;
		echo shared > /workspace/f; cat /environment/workspace/f; ls -d /environment/staging /environment/initialization /environment/packages`))
	want := "600 1000 1000\n1000\n1000\nro\ntmp-ok\nshared\n/environment/initialization\n/environment/packages\n/environment/staging\n"
	if string(out.Stdout) != want || out.ExitCode != 0 {
		t.Errorf("inside the sandbox got %q (stderr %q, exit %d), want %q", out.Stdout, out.Stderr, out.ExitCode, want)
	}
	// The Runtime process runs (it waits for Core).
	out = e.run(ref, sh(`ps -o comm | grep -c berth-runtime`))
	if strings.TrimSpace(string(out.Stdout)) != "1" {
		t.Errorf("berth-runtime not running: %q %q", out.Stdout, out.Stderr)
	}
	e.kill(ref)
}

func TestAcceptanceNestedSandboxLiftsProcMasks(t *testing.T) {
	e := newEngine(t, true)
	ref := contracttest.NewReference()
	info := e.create(ref)
	c, err := e.cli.ContainerInspect(context.Background(), info.ProviderID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := c.Container.HostConfig
	if !slices.Equal(hc.MaskedPaths, []string{"/sys/firmware", "/sys/devices/virtual/powercap"}) || len(hc.ReadonlyPaths) != 0 {
		t.Errorf("masks = %v, readonly = %v", hc.MaskedPaths, hc.ReadonlyPaths)
	}
	if hc.Init == nil || !*hc.Init {
		t.Error("no init process")
	}
	e.kill(ref)
}

func TestAcceptanceCreateTwiceCreatesNothing(t *testing.T) {
	e := newEngine(t, false)
	ref := contracttest.NewReference()
	e.create(ref)
	before, volsBefore := e.owned()
	_, err := e.p.Create(context.Background(), contracttest.CreateRequest(ref, resources))
	if !errdefs.IsExists(err) {
		t.Fatalf("second Create: %v", err)
	}
	after, volsAfter := e.owned()
	if !slices.Equal(before, after) || len(volsBefore) != len(volsAfter) {
		t.Fatalf("second Create changed resources: %v/%v -> %v/%v", before, volsBefore, after, volsAfter)
	}
	e.kill(ref)
	// Retained volumes without a container are never reused either.
	ref2 := contracttest.NewReference()
	ctx := context.Background()
	if _, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: e.p.HomeVolume(ref2), Labels: e.p.Labels(ref2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Create(ctx, contracttest.CreateRequest(ref2, resources)); !errdefs.IsExists(err) {
		t.Fatalf("Create over a retained volume: %v", err)
	}
	e.kill(ref2)
}

func TestAcceptanceForeignResourcesAreNeverTouched(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	ref := contracttest.NewReference()
	foreign := e.p.Labels(ref)
	foreign[docker.LabelTenant] = uuid.NewString()
	// A foreign container with the colliding name.
	cc, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   e.p.Name(ref),
		Config: &container.Config{Image: e.image, Cmd: []string{"true"}, Labels: foreign},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.cli.ContainerRemove(ctx, cc.ID, client.ContainerRemoveOptions{Force: true}) })
	// Refused before any mutation: the attempt's own absence receipt.
	if info, err := e.p.Create(ctx, contracttest.CreateRequest(ref, resources)); !errdefs.IsOwnership(err) || !info.IsAbsenceReceipt(ref) {
		t.Errorf("Create over a foreign container = %+v, %v", info, err)
	}
	// Nothing of ref's exists: nothing to clean up, nothing touched.
	if err := e.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Errorf("Kill with only a foreign container under the name: %v", err)
	}
	if _, vols := e.owned(); len(vols) != 0 {
		t.Errorf("volumes created beside a foreign container: %v", vols)
	}
	if _, err := e.p.RunCommand(ctx, ref, sh("true")); !errdefs.IsOwnership(err) {
		t.Errorf("RunCommand in a foreign container: %v", err)
	}
	if _, err := e.cli.ContainerInspect(ctx, cc.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("foreign container was removed: %v", err)
	}

	// Our container but a foreign volume: Kill removes nothing at all.
	ref2 := contracttest.NewReference()
	info := e.create(ref2)
	foreignVol := e.p.Labels(ref2)
	foreignVol[docker.LabelInstallation] = uuid.NewString()
	vol := e.p.EnvironmentVolume(ref2)
	// Swap the environment volume for a foreign one of the same name.
	if _, err := e.cli.ContainerRemove(ctx, info.ProviderID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.VolumeRemove(ctx, vol, client.VolumeRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: foreignVol}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.cli.VolumeRemove(ctx, vol, client.VolumeRemoveOptions{Force: true}) })
	if err := e.p.Kill(ctx, sandbox.KillRequest{Reference: ref2}); !errdefs.IsOwnership(err) {
		t.Fatalf("Kill with a foreign volume: %v", err)
	}
	if _, err := e.cli.VolumeInspect(ctx, e.p.HomeVolume(ref2), client.VolumeInspectOptions{}); err != nil {
		t.Errorf("Kill removed the owned home volume despite the foreign one: %v", err)
	}
	if _, err := e.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); err != nil {
		t.Errorf("foreign volume removed: %v", err)
	}
	_, _ = e.cli.VolumeRemove(ctx, e.p.HomeVolume(ref2), client.VolumeRemoveOptions{})
}

func TestAcceptanceKillRemovesAllThreeAndRepeats(t *testing.T) {
	e := newEngine(t, false)
	ref := contracttest.NewReference()
	e.create(ref)
	e.kill(ref)
	if cs, vs := e.owned(); len(cs)+len(vs) != 0 {
		t.Fatalf("after Kill: containers %v volumes %v", cs, vs)
	}
	if _, err := e.p.GetInfo(context.Background(), ref); !errdefs.IsNotFound(err) {
		t.Fatalf("GetInfo after Kill: %v", err)
	}
	// A repeated Kill finds no container, so for all it knows Create may
	// still be in flight: it claims the names with a tombstone, and GetInfo
	// then returns the absence receipt.
	e.kill(ref)
	if info, err := e.p.GetInfo(context.Background(), ref); err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo after the repeated Kill = %+v, %v; want the absence receipt", info, err)
	}
}

func TestAcceptanceRunCommand(t *testing.T) {
	e := newEngine(t, false)
	ref := contracttest.NewReference()
	e.create(ref)
	defer e.kill(ref)

	out := e.run(ref, sh(`printf 'out1\n'; printf 'err1\n' >&2; printf 'out2'; exit 7`))
	if string(out.Stdout) != "out1\nout2" || string(out.Stderr) != "err1\n" || out.ExitCode != 7 {
		t.Errorf("streams = %q / %q / %d", out.Stdout, out.Stderr, out.ExitCode)
	}
	secret := []byte("token-\x00\x01\xff-" + uuid.NewString())
	out = e.run(ref, sandbox.Command{Args: []string{"cat"}, Stdin: secret})
	if !bytes.Equal(out.Stdout, secret) {
		t.Errorf("stdin round trip = %q", out.Stdout)
	}
	out = e.run(ref, sandbox.Command{Args: []string{"sh", "-c", "dd if=/dev/zero bs=65536 count=64 2>/dev/null"}, OutputLimit: 1 << 20})
	if len(out.Stdout) != 1<<20 || !out.StdoutTruncated || out.ExitCode != 0 {
		t.Errorf("bounded output: %d bytes, truncated %v, exit %d", len(out.Stdout), out.StdoutTruncated, out.ExitCode)
	}
	out = e.run(ref, sandbox.Command{Args: []string{"pwd"}, Directory: "/environment"})
	if string(out.Stdout) != "/environment\n" {
		t.Errorf("directory: %q", out.Stdout)
	}
	out = e.run(ref, sandbox.Command{Args: []string{"no-such-program"}})
	if out.ExitCode == 0 {
		t.Errorf("missing program exited 0")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	if _, err := e.p.RunCommand(ctx, ref, sh("sleep 30")); !errdefs.IsCommandUnconfirmed(err) {
		t.Errorf("cancelled RunCommand: %v", err)
	}
}

func TestAcceptanceObserve(t *testing.T) {
	e := newEngine(t, false)
	ref := contracttest.NewReference()
	e.create(ref)
	defer e.kill(ref)
	e.run(ref, sh("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"))
	obs, err := e.p.Observe(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if obs.Reference != ref || obs.CPUUsageNanos == 0 || obs.MemoryBytes == 0 || obs.MemoryLimitBytes != uint64(resources.MemoryBytes) || obs.PIDs == 0 {
		t.Errorf("observation = %+v", obs)
	}
}

func TestAcceptanceProbe(t *testing.T) {
	e := newEngine(t, false)
	if err := e.p.Probe(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	missing := docker.New(e.cli, docker.Options{
		InstallationID: e.installation,
		Config:         docker.NodeConfig{Image: "sha256:" + strings.Repeat("0", 64), Network: "none"},
		Resources:      resources,
	})
	if code := sandbox.ProbeCode(missing.Probe(context.Background())); code != docker.ProbeImageMissing {
		t.Errorf("missing image: code %q", code)
	}
	huge := docker.New(e.cli, docker.Options{
		InstallationID: e.installation,
		Config:         docker.NodeConfig{Image: e.image, Network: "none"},
		Resources:      sandbox.Resources{CPUMillis: sandbox.MaxCPUMillis, MemoryBytes: sandbox.MaxMemoryBytes, DiskBytes: 1 << 30},
	})
	if code := sandbox.ProbeCode(huge.Probe(context.Background())); code != docker.ProbeCapacity {
		t.Errorf("capacity: code %q", code)
	}
	dead, err := docker.NewClient("unix://" + filepath.Join(t.TempDir(), "none.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if code := sandbox.ProbeCode(docker.New(dead, docker.Options{}).Probe(context.Background())); code != docker.ProbeEngineUnreachable {
		t.Errorf("dead engine: code %q", code)
	}
}
