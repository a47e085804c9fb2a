package nodeproto

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/system"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/nodes"

	"berth.dev/test/internal/stack"
)

// hostMemTotal reads MemTotal from /proc/meminfo, as the agent on this
// same host does.
func hostMemTotal(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		testenv.Unavailable(t, "no /proc/meminfo")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

// diskOf returns the free (f_bavail) and total bytes of dir's filesystem.
func diskOf(t *testing.T, dir string) (free, total int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize
}

// near: the host's free disk moves while the test runs (the machine is
// shared); a GiB either way still tells two filesystems apart here.
func near(got, want int64) bool { return got >= want-1<<30 && got <= want+1<<30 }

// helloAndReport returns the capacity in Hello and in the first health
// report of a connection, both once a generation is served (the node
// learns the engine's data root from the first generation's adapter).
func helloAndReport(t *testing.T, n *stack.Node) (hello, report *pb.Capacity) {
	t.Helper()
	cc := n.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n.Connect(t, cc, 1)
	h, _, err := nodes.Hello(ctx, pb.NewNodeServiceClient(cc))
	if err != nil {
		t.Fatal(err)
	}
	conn, _ := n.Connect(t, cc, 1)
	r, _ := conn.Last()
	return h.GetCapacity(), r.GetCapacity()
}

// TestCapacityReflectsReserveAndOvercommit: the capacity in Hello and in
// the health reports is the host net of the configured reserve, CPU times
// the overcommit factor, and disk is measured on the engine's data root
// when the agent sees it.
func TestCapacityReflectsReserveAndOvercommit(t *testing.T) {
	const dataRoot = "/dev/shm" // another filesystem than the state directory's
	if fi, err := os.Stat(dataRoot); err != nil || !fi.IsDir() {
		testenv.Unavailable(t, "no /dev/shm to stand for the engine's data root")
	}
	inst := stack.NewInstallation(t)
	engine := stack.FixtureEngine(t)
	engine.ConfigureInfo(func(i *system.Info) { i.DockerRootDir = dataRoot })
	n := stack.StartNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage, Capacity: map[string]any{
		"reserve":        map[string]any{"cpu_millis": 250, "memory_bytes": 512 << 20, "disk_bytes": 0},
		"cpu_overcommit": 2.0,
	}})
	wantCPU := (int64(runtime.NumCPU())*1000 - 250) * 2
	wantMemory := hostMemTotal(t) - 512<<20
	rootFree, _ := diskOf(t, dataRoot)
	stateFree, _ := diskOf(t, n.Dir)
	if near(rootFree, stateFree) {
		testenv.Unavailable(t, "the data root and the state directory have the same free space here")
	}
	hello, report := helloAndReport(t, n)
	for name, c := range map[string]*pb.Capacity{"hello": hello, "health report": report} {
		if c.GetCpuMillis() != wantCPU || c.GetMemoryBytes() != wantMemory || !near(c.GetDiskFreeBytes(), rootFree) {
			t.Errorf("%s capacity = %v, want cpu %d, memory %d, disk about %d (the data root's, not the state directory's %d)",
				name, c, wantCPU, wantMemory, rootFree, stateFree)
		}
	}
	if strings.Contains(n.Logs(), "disk_data_root_not_visible") {
		t.Errorf("fallback logged for a visible data root:\n%s", n.Logs())
	}
}

// TestCapacityDefaultsAndDataRootFallback: with no capacity section the
// node keeps the default reserve (the larger of 500 millis, 1 GiB, 5 GiB
// and 10 % of the host's total), overcommits nothing, and, when the
// engine's data root is not visible to the agent, measures disk on its
// state directory and says so with a fixed diagnostic instead of failing.
func TestCapacityDefaultsAndDataRootFallback(t *testing.T) {
	inst := stack.NewInstallation(t)
	engine := stack.FixtureEngine(t)
	engine.ConfigureInfo(func(i *system.Info) { i.DockerRootDir = "/no/such/berth-engine-root" })
	n := stack.StartNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage, Capacity: map[string]any{}})
	reserve := func(floor, total int64) int64 { return max(floor, total/100*10) }
	cpu, memory := int64(runtime.NumCPU())*1000, hostMemTotal(t)
	free, total := diskOf(t, n.Dir)
	wantCPU := max(0, cpu-reserve(500, cpu))
	wantMemory := max(0, memory-reserve(1<<30, memory))
	wantDisk := max(0, free-reserve(5<<30, total))
	hello, report := helloAndReport(t, n)
	for name, c := range map[string]*pb.Capacity{"hello": hello, "health report": report} {
		if c.GetCpuMillis() != wantCPU || c.GetMemoryBytes() != wantMemory || !near(c.GetDiskFreeBytes(), wantDisk) {
			t.Errorf("%s capacity = %v, want cpu %d, memory %d, disk about %d", name, c, wantCPU, wantMemory, wantDisk)
		}
	}
	if got := strings.Count(n.Logs(), `"diagnostic":"disk_data_root_not_visible"`); got != 1 {
		t.Errorf("fallback diagnostic logged %d times, want once:\n%s", got, n.Logs())
	}
}

// TestCapacityConfigurationRefused: a bad capacity value stops the agent
// at start with an error naming the field.
func TestCapacityConfigurationRefused(t *testing.T) {
	inst := stack.NewInstallation(t)
	engine := stack.FixtureEngine(t)
	for field, capacity := range map[string]map[string]any{
		"config.capacity.cpu_overcommit":     {"cpu_overcommit": 17},
		"config.capacity.reserve.cpu_millis": {"reserve": map[string]any{"cpu_millis": -1}},
	} {
		n := stack.PrepareNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage, Capacity: capacity})
		out, err := exec.Command(stack.NodeAgentBin(), "serve", "--config", n.Config).CombinedOutput()
		if err == nil || !strings.Contains(string(out), field) {
			t.Errorf("%v: %v, want a refusal naming %s:\n%s", capacity, err, field, out)
		}
	}
}
