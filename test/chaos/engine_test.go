package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/lifecycle"

	"berth.dev/test/internal/stack"
)

// Where scripts/test-services keeps the engine binaries and containerd.
const (
	engineBinDir     = "/var/cache/berth/bin"
	containerdSocket = "/run/berth-test/containerd/containerd.sock"
	// engineNamespace is the private engine's containerd namespace. It is
	// fixed (a lock serialises its users) so that repeated runs reuse the
	// image content instead of leaving a namespace each.
	engineNamespace = "berth-chaos-engine"
	engineLock      = "/run/berth-test/chaos-engine.lock"
	// engineBridge is the private engine's own bridge. Never "none": a
	// dockerd started with --bridge none deletes the host's docker0, the
	// shared engine's bridge (found the hard way: it broke test/runtime).
	engineBridge   = "bchaos0"
	engineBridgeIP = "10.253.253.1/24"
)

// engineSlot is one set of the private engine's fixed names: its
// containerd namespace, its lock, its bridge and the bridge's address.
// Slot 0 is the names above; a test that needs two private engines at
// once (a node restarted on another engine) takes slots 0 and 1, each
// serialised by its own lock.
type engineSlot struct {
	namespace, lock, bridge, bridgeIP string
}

// slotOf returns the names of slot i (0 or 1).
func slotOf(i int) engineSlot {
	if i == 0 {
		return engineSlot{engineNamespace, engineLock, engineBridge, engineBridgeIP}
	}
	return engineSlot{
		namespace: fmt.Sprintf("%s%d", engineNamespace, i),
		lock:      fmt.Sprintf("/run/berth-test/chaos-engine%d.lock", i),
		bridge:    fmt.Sprintf("bchaos%d", i),
		bridgeIP:  fmt.Sprintf("10.253.%d.1/24", 253-i),
	}
}

// dockerd is a Docker Engine of the test's own: its own socket, data and
// exec roots, its own bridge interface and no iptables rules, on the test
// services' containerd under its own namespace. Restarting it disturbs no
// other test.
type dockerd struct {
	t    testing.TB
	slot engineSlot
	dir  string
	Host string
	// Image is the runtime image built from this tree and loaded into the
	// private engine.
	Image string
	cmd   *exec.Cmd
	exit  chan struct{}
}

// startDockerd starts a private engine and loads the runtime image into
// it. It skips under -short, and (fails under CI=true) without the test
// services' engine binaries and containerd.
func startDockerd(t testing.TB) *dockerd {
	t.Helper()
	return startDockerdOn(t, 0)
}

// startDockerdOn is startDockerd whose data root, when dataRootSize is
// not 0, is a tmpfs of that many bytes (a disk that can fill up).
func startDockerdOn(t testing.TB, dataRootSize int64) *dockerd {
	t.Helper()
	return startDockerdSlot(t, 0, dataRootSize)
}

// startDockerdSlot is startDockerdOn with the names of slot (slotOf), so
// that two private engines can run at once.
func startDockerdSlot(t testing.TB, slot int, dataRootSize int64) *dockerd {
	t.Helper()
	names := slotOf(slot)
	testenv.SkipShort(t, "a private Docker Engine")
	for _, p := range []string{filepath.Join(engineBinDir, "dockerd"), containerdSocket} {
		if _, err := os.Stat(p); err != nil || os.Geteuid() != 0 {
			msg := "a private Docker Engine needs root, " + p + " (scripts/test-services up builds and starts them)"
			testenv.Unavailable(t, msg)
		}
	}
	lock, err := os.OpenFile(names.lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Close() })
	dir, err := os.MkdirTemp("", "bdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// After the engine's stop (cleanups run last first): dockerd leaves its
	// data root bind-mounted over itself, and a crashed engine its
	// containers' rootfs mounts under it; unmounted here (lazily, the
	// whole tree), they no longer pile up on the machine run after run.
	t.Cleanup(func() { _ = exec.Command("umount", "-R", "-l", filepath.Join(dir, "data")).Run() })
	if dataRootSize > 0 {
		data := filepath.Join(dir, "data")
		if err := os.Mkdir(data, 0o710); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", dataRootSize), "tmpfs", data).CombinedOutput(); err != nil {
			t.Fatalf("mount a tmpfs data root: %v %s", err, out)
		}
		// Registered before the engine's stop, so it runs after it.
		t.Cleanup(func() { _ = exec.Command("umount", "-l", data).Run() })
	}
	_ = exec.Command("ip", "link", "del", names.bridge).Run() // a leftover of a killed run
	for _, args := range [][]string{
		{"link", "add", names.bridge, "type", "bridge"},
		{"addr", "add", names.bridgeIP, "dev", names.bridge},
		{"link", "set", names.bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", names.bridge).Run() })
	d := &dockerd{t: t, slot: names, dir: dir, Host: "unix://" + filepath.Join(dir, "d.sock")}
	d.start()
	t.Cleanup(d.stop)
	load := exec.Command(filepath.Join(stack.RepoRoot(), "scripts", "build-runtime-image"))
	load.Env = append(os.Environ(), "BERTH_TEST_DOCKER_HOST="+d.Host)
	out, err := load.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "BERTH_TEST_RUNTIME_IMAGE="); ok {
			d.Image = v
		}
	}
	if err != nil || d.Image == "" {
		t.Fatalf("loading the runtime image into the private engine: %v\n%s", err, out)
	}
	return d
}

// start runs dockerd on the private folders and waits for its API.
func (d *dockerd) start() {
	d.t.Helper()
	d.cmd = exec.Command(filepath.Join(engineBinDir, "dockerd"),
		"--host", d.Host, "--data-root", filepath.Join(d.dir, "data"), "--exec-root", filepath.Join(d.dir, "exec"),
		"--pidfile", filepath.Join(d.dir, "pid"), "--containerd", containerdSocket,
		"--containerd-namespace", d.slot.namespace, "--containerd-plugins-namespace", d.slot.namespace+"-plugins",
		"--add-runtime", "berth-runc="+filepath.Join(engineBinDir, "runc"), "--default-runtime", "berth-runc",
		"--bridge", d.slot.bridge, "--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false", "--init-path", "/usr/bin/tini-static", "--group", "root")
	d.cmd.Env = append(os.Environ(), "PATH="+engineBinDir+":"+os.Getenv("PATH"))
	logFile, err := os.OpenFile(filepath.Join(d.dir, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.exit = make(chan struct{})
	cmd, exit := d.cmd, d.exit
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(exit) }()
	cli, err := docker.NewClient(d.Host)
	if err != nil {
		d.t.Fatal(err)
	}
	defer cli.Close()
	stack.WaitFor(d.t, 60*time.Second, "the private engine to answer", func() bool {
		_, err := cli.Ping(context.Background(), client.PingOptions{})
		return err == nil
	})
}

// crash SIGKILLs dockerd (its containers' shims live on under containerd).
func (d *dockerd) crash() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exit
}

// stop ends dockerd with SIGTERM.
func (d *dockerd) stop() {
	if !stack.Terminate(d.cmd, d.exit, 30*time.Second) {
		<-d.exit // killed
	}
}

// TestDockerEngineRestart runs a cluster whose node agents use a private
// Docker Engine and crashes the engine (SIGKILL of dockerd) while it
// performs a Create, keeping it down for a seeded 1-3 s. The node agents
// report the calls' outcomes; Core never replays a Create (I1); the
// Sessions created around the crash end ACTIVE or FAILED (I6); after
// deletion nothing is left on the engine (I2) while the foreign resources
// survive (I3). The Create the crash cut off has an unknown outcome, so its
// deletion leaves a tombstone (the creation-absence receipt): every node
// reports what the engine holds (GetNode creation_receipts_held, read
// against the engine's own listing), and after one more engine restart
// (the engine that could hold a request of that Create has exited) the
// node agents remove it: the engine then holds nothing of the
// installation, tombstones included (issue 26, item 11).
func TestDockerEngineRestart(t *testing.T) {
	scenario(t, "Docker Engine restarted under the nodes", func(t *testing.T, r *run) {
		engine := startDockerd(t)
		c := newCluster(t, r, options{proxied: -1, engine: engine.Host, image: engine.Image, healthInterval: "1s"})
		names := c.mustCreate(2)
		if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != len(names) {
			t.Fatalf("only %d of %d Sessions ACTIVE before the fault", len(got), len(names))
		}
		fired := c.killOnEvent([]events.Action{events.ActionCreate}, func(*node) { engine.crash() })
		faulted := c.mustCreate(3)
		names = append(names, faulted...)
		waitFired(t, fired, activeDeadline, "container create")
		down := time.Duration(1000+r.rng.IntN(2000)) * time.Millisecond
		r.fault(t, "SIGKILL dockerd on a container create, down for %v", down)
		time.Sleep(down)
		engine.start()
		repaired := time.Now()
		r.recovery = c.probe(repaired)
		t.Logf("recovery (engine back to a probe Session ACTIVE): %v", r.recovery)
		c.waitActive(names, repaired, 8*time.Second)
		// I6 for the Sessions created around the crash. The two created
		// before it have exited containers (no restart policy): each
		// reports exactly that (core/lifecycle's engine-restart rule).
		requireOutcomes(t, c, faulted, outcomeDeadline)
		requireStoppedOrActive(t, c, names[:len(names)-len(faulted)], observeDeadline)
		c.invariants()

		tombs := c.engineTombstones()
		if tombs == 0 {
			t.Fatalf("no tombstone on the engine after deleting the Sessions: the crash cut off a container create, whose Create's outcome is unknown")
		}
		c.waitReceiptsHeld(tombs, receiptsDeadline)
		engine.stop()
		engine.start()
		r.fault(t, "restarted dockerd after the deletions (%d tombstones held)", tombs)
		c.waitReceiptsHeld(0, receiptsDeadline)
		if left, err := dockertest.Leftovers(context.Background(), c.cli, []string{c.inst}); err != nil || len(left) != 0 {
			c.violation("I2", "after the engine restart the engine holds %v of the installation (tombstones included), want none (%v)", left, err)
		}
	})
}

// requireStoppedOrActive is I6 for Sessions that ran before the engine
// under them restarted: Core never starts a container again, so each
// Session ends, within deadline, either ACTIVE by requireOutcomes' reading
// (its container runs again: an engine that restores its containers) or
// with its allocation's container on the engine not running and the
// Session reporting exactly that: compute_available false with
// compute_stopped, the Session still ACTIVE (an observation moves no
// state). Anything else, a FAILED Session included, is a violation.
func requireStoppedOrActive(t *testing.T, c *cluster, names []string, deadline time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		list := outcomes(c, names)
		allocs := bySession(c.allocations())
		var pending []string
		for i, n := range names {
			if list[i].active {
				continue
			}
			a := allocs[n]
			containers, _ := c.engineResources(allocationID(a))
			running := false
			for _, r := range containers {
				running = running || r
			}
			s := c.getSession(n)
			env := s.GetEnvironment()
			if a == nil || len(containers) == 0 || running || s.GetState() != adminv1.Session_STATE_ACTIVE ||
				env.GetComputeAvailable() || env.GetComputeReason() != lifecycle.ReasonStopped {
				pending = append(pending, fmt.Sprintf("%s: %s, %d containers on the engine (running %v), Session %v, compute_available %v %q",
					n, list[i].part, len(containers), running, s.GetState(), env.GetComputeAvailable(), env.GetComputeReason()))
				continue
			}
			list[i].part = "ACTIVE (compute stopped)"
		}
		if len(pending) == 0 || time.Now().After(end) {
			t.Logf("outcomes of the Sessions that ran before the engine restart: %s", parts(list))
			for _, p := range pending {
				c.violation("I6", "not ACTIVE nor reporting its stopped container (%s) %v after the repair: %s", lifecycle.ReasonStopped, deadline, p)
			}
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// receiptsDeadline bounds how long the nodes take to report a change in
// the tombstones they hold: a few health reports (1 s apart here) and a
// node's reconnection to a restarted engine.
const receiptsDeadline = 30 * time.Second

// engineTombstones counts the installation's tombstones on the engine.
func (c *cluster) engineTombstones() int {
	c.t.Helper()
	f := stack.InstallationFilter(c.inst).Add("label", docker.LabelTombstone+"=1")
	cs, err := c.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		c.t.Fatalf("ContainerList: %v", err)
	}
	return len(cs.Items)
}

// waitReceiptsHeld waits until GetNode reports want creation receipts
// held on every node (the nodes share the one engine, and each counts the
// installation's tombstones on it), and the engine holds exactly want
// tombstones; a violation after within.
func (c *cluster) waitReceiptsHeld(want int, within time.Duration) {
	c.t.Helper()
	end := time.Now().Add(within)
	for {
		var got []int32
		for _, n := range c.nodes {
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			res, err := c.nodesAPI().GetNode(ctx, &adminv1.GetNodeRequest{Name: n.name})
			cancel()
			if err == nil {
				got = append(got, res.GetNode().GetCapacity().GetCreationReceiptsHeld())
			}
		}
		onEngine := c.engineTombstones()
		ok := onEngine == want && len(got) == len(c.nodes)
		for _, g := range got {
			ok = ok && int(g) == want
		}
		if ok {
			return
		}
		if time.Now().After(end) {
			c.violation("receipts", "after %v the nodes report %v creation receipts held and the engine holds %d tombstones, want %d", within, got, onEngine, want)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestEngineDataRootFull freezes the node agents, creates Sessions (placed
// and committed, their Creates not sent), fills the private engine's data
// root (a 4 GiB tmpfs) to its last bytes and thaws the agents: the
// Creates meet a full disk. Core never replays a Create (I1); while the
// disk is full a new Session is accepted or refused exactly
// FAILED_PRECONDITION no_ready_node_with_capacity (core/store's
// ErrNoCapacity: the nodes report their free disk); after the disk is
// freed every Session ends ACTIVE or FAILED
// with a failure code (I6), and cleanup leaves nothing (I1-I3). It found
// the engine leaving unlabelled volumes behind failed creates (the Docker
// adapter's volume intents settle them now).
func TestEngineDataRootFull(t *testing.T) {
	scenario(t, "Docker Engine data root full during creates", func(t *testing.T, r *run) {
		engine := startDockerdOn(t, 4<<30)
		c := newCluster(t, r, options{proxied: -1, engine: engine.Host, image: engine.Image})
		thaw := c.freeze()
		names := c.mustCreate(3)
		filler := filepath.Join(engine.dir, "data", "chaos-filler")
		if out, err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=5000").CombinedOutput(); err == nil {
			t.Fatalf("filled 5000 MiB into a 4 GiB data root: %s", out)
		}
		r.fault(t, "the engine's data root full (a filler file takes the last byte) under %d placed Creates", len(names))
		thaw()
		// Fault timing, not synchronisation: the next create lands while
		// the thawed Creates meet the full disk. It may be accepted or
		// refused (the nodes report their free disk every health
		// interval), so no check depends on how long this waits.
		time.Sleep(3 * time.Second)
		if name, err := c.createSession(); err == nil {
			names = append(names, name)
			t.Logf("CreateSession on a full disk: accepted")
		} else {
			var refused refusals
			refused.add(err)
			t.Logf("CreateSession on a full disk: refused %v", &refused)
			c.requireRefusals("CreateSession on a full disk", &refused, refusedNoCapacity)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		repaired := time.Now()
		r.recovery = c.probe(repaired)
		t.Logf("recovery (disk freed to a probe Session ACTIVE): %v", r.recovery)
		requireOutcomes(t, c, names, outcomeDeadline)
		c.invariants()
	})
}
