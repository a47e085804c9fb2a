package nodeagent

import (
	"bufio"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Capacity is what the node offers to sandboxes, reported with Hello and
// every health report: the host's resources net of the host reserve, CPU
// multiplied by the overcommit factor. Core divides it by the deployment's
// per-sandbox resources to bound what it places here.
type Capacity struct {
	CPUMillis     int64
	MemoryBytes   int64
	DiskFreeBytes int64
}

// HostResources is what the host has, before the reserve and the
// overcommit. A figure that could not be read is zero, never guessed.
type HostResources struct {
	CPUMillis   int64
	MemoryBytes int64
	// DiskFreeBytes is the space unprivileged writers may still use on the
	// measured filesystem (statfs f_bavail); DiskTotalBytes is its size,
	// which the default disk reserve is a share of.
	DiskFreeBytes  int64
	DiskTotalBytes int64
}

// ReadHost reads the host's CPUs, memory (/proc/meminfo MemTotal) and the
// free and total space of the filesystem holding dir.
func ReadHost(dir string) HostResources {
	h := HostResources{CPUMillis: int64(runtime.NumCPU()) * 1000, MemoryBytes: memTotal()}
	h.DiskFreeBytes, h.DiskTotalBytes, _ = statDisk(dir)
	return h
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				return kb * 1024
			}
			return 0
		}
	}
	return 0
}

// statDisk returns the free (f_bavail) and total space of the filesystem
// holding dir; ok is false, with zeros, when dir cannot be measured.
func statDisk(dir string) (free, total int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, true
}

// CapacityPolicy turns what the host has into what the node offers: each
// reserve is subtracted (a nil reserve takes its default rule, see
// defaults.go), then CPU is multiplied by CPUOvercommit. Memory and disk
// are never overcommitted.
type CapacityPolicy struct {
	ReserveCPUMillis   *int64
	ReserveMemoryBytes *int64
	ReserveDiskBytes   *int64
	// CPUOvercommit is held in [MinCPUOvercommit, MaxCPUOvercommit]; zero
	// (or NaN) means DefaultCPUOvercommit. The configuration refuses what
	// is out of bounds; Apply only never trusts it.
	CPUOvercommit float64
}

// Reserve returns the reserve the policy keeps back from h.
func (p CapacityPolicy) Reserve(h HostResources) HostResources {
	pick := func(set *int64, floor, total int64) int64 {
		if set != nil {
			return *set
		}
		return DefaultReserve(floor, total)
	}
	return HostResources{
		CPUMillis:     pick(p.ReserveCPUMillis, DefaultReserveCPUMillis, h.CPUMillis),
		MemoryBytes:   pick(p.ReserveMemoryBytes, DefaultReserveMemoryBytes, h.MemoryBytes),
		DiskFreeBytes: pick(p.ReserveDiskBytes, DefaultReserveDiskBytes, h.DiskTotalBytes),
	}
}

// Apply returns the capacity the node reports for h: never negative (a
// reserve larger than the host leaves zero), CPU rounded down after the
// overcommit.
func (p CapacityPolicy) Apply(h HostResources) Capacity {
	r := p.Reserve(h)
	net := func(have, keep int64) int64 { return max(0, have-max(0, keep)) }
	factor := p.CPUOvercommit
	if factor == 0 || math.IsNaN(factor) {
		factor = DefaultCPUOvercommit
	}
	factor = min(max(factor, MinCPUOvercommit), MaxCPUOvercommit)
	return Capacity{
		CPUMillis:     int64(math.Floor(float64(net(h.CPUMillis, r.CPUMillis)) * factor)),
		MemoryBytes:   net(h.MemoryBytes, r.MemoryBytes),
		DiskFreeBytes: net(h.DiskFreeBytes, r.DiskFreeBytes),
	}
}

// DiagnosticDataRootNotVisible is the fixed diagnostic the node agent logs
// when the adapter names a data root (the Docker engine's DockerRootDir)
// that the agent cannot see, typically because it runs in another mount
// namespace: disk is then measured on the state directory instead.
const DiagnosticDataRootNotVisible = "disk_data_root_not_visible"

// CapacityMeter measures the node's capacity for every report. Disk is
// measured on the backend's data root, where sandboxes' writable layers
// and volumes live, when the agent can see it there (an absolute path to
// a directory the agent can statfs); otherwise on the state directory, and
// the fallback is logged with DiagnosticDataRootNotVisible whenever the
// visibility changes. Measuring never fails.
type CapacityMeter struct {
	policy   CapacityPolicy
	stateDir string
	log      *slog.Logger

	mu       sync.Mutex
	dataRoot string
	fellBack bool // the latest measure fell back to the state directory
}

// SetDataRoot names the backend's data root when none is named yet (the
// node agent learns it from the first generation's adapter; every
// generation of a node uses the same engine). An empty dir changes
// nothing.
func (m *CapacityMeter) SetDataRoot(dir string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dataRoot == "" && dir != "" {
		m.dataRoot = dir
	}
}

// NewCapacityMeter returns the meter for policy. dataRoot is the backend's
// data root as the backend names it; empty when it has none, and then
// disk is measured on stateDir without a diagnostic.
func NewCapacityMeter(policy CapacityPolicy, dataRoot, stateDir string, log *slog.Logger) *CapacityMeter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &CapacityMeter{policy: policy, dataRoot: dataRoot, stateDir: stateDir, log: log}
}

// Measure reads the host and applies the policy.
func (m *CapacityMeter) Measure() Capacity {
	dir, visible := m.diskDir()
	m.note(visible)
	return m.policy.Apply(ReadHost(dir))
}

// DiskDir returns the directory whose filesystem disk is measured on, and
// whether that is the data root.
func (m *CapacityMeter) DiskDir() (dir string, dataRoot bool) { return m.diskDir() }

func (m *CapacityMeter) diskDir() (string, bool) {
	root := m.root()
	if root == "" {
		return m.stateDir, false
	}
	if filepath.IsAbs(root) {
		if fi, err := os.Stat(root); err == nil && fi.IsDir() {
			if _, _, ok := statDisk(root); ok {
				return root, true
			}
		}
	}
	return m.stateDir, false
}

func (m *CapacityMeter) root() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dataRoot
}

// note logs a change of visibility of a named data root: the first
// fallback and every later change, never every report.
func (m *CapacityMeter) note(visible bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dataRoot == "" {
		return
	}
	switch {
	case !visible && !m.fellBack:
		m.log.Warn("disk capacity measured on the state directory: the engine's data root is not visible to the node agent",
			"diagnostic", DiagnosticDataRootNotVisible)
	case visible && m.fellBack:
		m.log.Info("disk capacity measured on the engine's data root again")
	}
	m.fellBack = !visible
}
