package nodeagent

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"berth.dev/sandbox/errdefs"
)

func TestReadHostReadsTheHost(t *testing.T) {
	h := ReadHost(t.TempDir())
	if h.CPUMillis != int64(runtime.NumCPU())*1000 || h.MemoryBytes < 64<<20 || h.DiskFreeBytes <= 0 || h.DiskTotalBytes < h.DiskFreeBytes {
		t.Fatalf("host = %+v", h)
	}
	if h := ReadHost("/no/such/dir"); h.DiskFreeBytes != 0 || h.DiskTotalBytes != 0 {
		t.Fatalf("disk invented for a missing directory: %+v", h)
	}
}

func ptr[T any](v T) *T { return &v }

// TestCapacityPolicyArithmetic: the reported capacity is the host net of
// the reserve (default: the larger of the floor and 10 % of the total;
// disk's share is of the filesystem's size, not of its free space), CPU
// times the overcommit; never negative, whatever the reserve.
func TestCapacityPolicyArithmetic(t *testing.T) {
	const gib = int64(1 << 30)
	small := HostResources{CPUMillis: 2000, MemoryBytes: 4 * gib, DiskFreeBytes: 20 * gib, DiskTotalBytes: 40 * gib}
	large := HostResources{CPUMillis: 64000, MemoryBytes: 256 * gib, DiskFreeBytes: 500 * gib, DiskTotalBytes: 1000 * gib}
	for name, tc := range map[string]struct {
		p    CapacityPolicy
		h    HostResources
		want Capacity
	}{
		"default reserve, small host: the floors": {
			CapacityPolicy{}, small,
			Capacity{CPUMillis: 1500, MemoryBytes: 3 * gib, DiskFreeBytes: 15 * gib},
		},
		"default reserve, large host: 10 %": {
			CapacityPolicy{}, large,
			Capacity{CPUMillis: 57600, MemoryBytes: 256*gib - 256*gib/100*10, DiskFreeBytes: 500*gib - 1000*gib/100*10},
		},
		"explicit zero reserve: the whole host": {
			CapacityPolicy{ReserveCPUMillis: ptr(int64(0)), ReserveMemoryBytes: ptr(int64(0)), ReserveDiskBytes: ptr(int64(0))}, small,
			Capacity{CPUMillis: 2000, MemoryBytes: 4 * gib, DiskFreeBytes: 20 * gib},
		},
		"reserve larger than the host: zero, never negative": {
			CapacityPolicy{ReserveCPUMillis: ptr(int64(3000)), ReserveMemoryBytes: ptr(5 * gib), ReserveDiskBytes: ptr(21 * gib), CPUOvercommit: 16}, small,
			Capacity{},
		},
		"default reserve on a host smaller than the floors": {
			CapacityPolicy{CPUOvercommit: 4}, HostResources{CPUMillis: 400, MemoryBytes: gib / 2, DiskFreeBytes: gib, DiskTotalBytes: 2 * gib},
			Capacity{},
		},
		"nothing measured: zero": {CapacityPolicy{}, HostResources{}, Capacity{}},
		"overcommit doubles CPU net of the reserve, not memory or disk": {
			CapacityPolicy{ReserveCPUMillis: ptr(int64(500)), ReserveMemoryBytes: ptr(gib), ReserveDiskBytes: ptr(gib), CPUOvercommit: 2}, small,
			Capacity{CPUMillis: 3000, MemoryBytes: 3 * gib, DiskFreeBytes: 19 * gib},
		},
		"fractional overcommit rounds down": {
			CapacityPolicy{ReserveCPUMillis: ptr(int64(1)), CPUOvercommit: 1.5}, HostResources{CPUMillis: 1000},
			Capacity{CPUMillis: 1498},
		},
		"overcommit above the bound is held at 16": {
			CapacityPolicy{ReserveCPUMillis: ptr(int64(0)), CPUOvercommit: 100}, HostResources{CPUMillis: 1000},
			Capacity{CPUMillis: 16000},
		},
		"overcommit below the bound is held at 1": {
			CapacityPolicy{ReserveCPUMillis: ptr(int64(0)), CPUOvercommit: 0.25}, HostResources{CPUMillis: 1000},
			Capacity{CPUMillis: 1000},
		},
		"NaN overcommit is the default": {
			CapacityPolicy{ReserveCPUMillis: ptr(int64(0)), CPUOvercommit: math.NaN()}, HostResources{CPUMillis: 1000},
			Capacity{CPUMillis: 1000},
		},
		"a negative reserve reserves nothing": {
			CapacityPolicy{ReserveCPUMillis: ptr(int64(-5000))}, HostResources{CPUMillis: 1000},
			Capacity{CPUMillis: 1000},
		},
	} {
		if got := tc.p.Apply(tc.h); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

const validConfig = `{"state_dir":"/var/lib/berth","listen":"127.0.0.1:7443","provider":"docker","node":{}`

func configWith(capacity string) []byte {
	if capacity == "" {
		return []byte(validConfig + `}`)
	}
	return []byte(validConfig + `,"capacity":` + capacity + `}`)
}

// TestCapacityConfig: the capacity section is optional field by field,
// decoded strictly, and a bad value is refused naming its field.
func TestCapacityConfig(t *testing.T) {
	cfg, err := DecodeConfig(configWith(""))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Capacity.Policy(); p.ReserveCPUMillis != nil || p.ReserveMemoryBytes != nil || p.ReserveDiskBytes != nil || p.CPUOvercommit != DefaultCPUOvercommit {
		t.Fatalf("defaults: %+v", p)
	}
	cfg, err = DecodeConfig(configWith(`{"reserve":{"cpu_millis":0,"memory_bytes":2147483648},"cpu_overcommit":2.5}`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Capacity.Policy()
	if p.ReserveCPUMillis == nil || *p.ReserveCPUMillis != 0 || p.ReserveMemoryBytes == nil || *p.ReserveMemoryBytes != 2<<30 ||
		p.ReserveDiskBytes != nil || p.CPUOvercommit != 2.5 {
		t.Fatalf("policy: %+v", p)
	}
	for _, ok := range []string{`{}`, `{"cpu_overcommit":1}`, `{"cpu_overcommit":16}`, `{"reserve":{}}`} {
		if _, err := DecodeConfig(configWith(ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for capacity, field := range map[string]string{
		`{"reserve":{"cpu_millis":-1}}`:                  "config.capacity.reserve.cpu_millis",
		`{"reserve":{"memory_bytes":-1}}`:                "config.capacity.reserve.memory_bytes",
		`{"reserve":{"disk_bytes":-1}}`:                  "config.capacity.reserve.disk_bytes",
		`{"cpu_overcommit":0}`:                           "config.capacity.cpu_overcommit",
		`{"cpu_overcommit":0.99}`:                        "config.capacity.cpu_overcommit",
		`{"cpu_overcommit":16.01}`:                       "config.capacity.cpu_overcommit",
		`{"cpu_overcommit":-2}`:                          "config.capacity.cpu_overcommit",
		`{"cpu_overcommit":"2"}`:                         "config",
		`{"memory_overcommit":2}`:                        "config",
		`{"reserve":{"cpu":500}}`:                        "config",
		`{"reserve":{"cpu_millis":1.5}}`:                 "config",
		`{"reserve":{"disk_bytes":1e30}}`:                "config",
		`[]`:                                             "config",
		`{"cpu_overcommit":2,"cpu_overcommit":3}`:        "config",
		`{"reserve":{"cpu_millis":9223372036854775808}}`: "config",
	} {
		_, err := DecodeConfig(configWith(capacity))
		if got, ok := errdefs.Field(err); !ok || got != field {
			t.Errorf("%s: %v, want a field error on %s", capacity, err, field)
		}
	}
}

// TestMetricsListenConfig: metrics are off unless the file names an
// address; a malformed one, or the version key the command sets, is
// refused.
func TestMetricsListenConfig(t *testing.T) {
	cfg, err := DecodeConfig([]byte(validConfig + `}`))
	if err != nil || cfg.MetricsListen != "" {
		t.Fatalf("default: %q, %v; want no metrics", cfg.MetricsListen, err)
	}
	cfg, err = DecodeConfig([]byte(validConfig + `,"metrics_listen":"127.0.0.1:9464"}`))
	if err != nil || cfg.MetricsListen != "127.0.0.1:9464" {
		t.Fatalf("metrics_listen: %q, %v", cfg.MetricsListen, err)
	}
	for doc, field := range map[string]string{
		`,"metrics_listen":"9464"}`:  "config.metrics_listen",
		`,"metrics_listen":1}`:       "config",
		`,"Version":"v1"}`:           "config",
		`,"metrics_listen":"a:1:2"}`: "config.metrics_listen",
	} {
		_, err := DecodeConfig([]byte(validConfig + doc))
		if got, ok := errdefs.Field(err); !ok || got != field {
			t.Errorf("%s: %v, want a field error on %s", doc, err, field)
		}
	}
}

// TestCapacityMeterMeasuresDiskOnTheDataRoot: disk is measured on the
// backend's data root when the agent sees it, and on the state directory
// otherwise, logged once with the fixed diagnostic, never failing.
func TestCapacityMeterMeasuresDiskOnTheDataRoot(t *testing.T) {
	state, root := t.TempDir(), t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := CapacityPolicy{ReserveCPUMillis: ptr(int64(0)), ReserveMemoryBytes: ptr(int64(0)), ReserveDiskBytes: ptr(int64(0))}
	for _, tc := range []struct {
		name, dataRoot, want string
		diagnostic           bool
	}{
		{"visible", root, root, false},
		{"no data root", "", state, false},
		{"missing (another mount namespace)", "/no/such/berth-data-root", state, true},
		{"relative", "var/lib/docker", state, true},
		{"not a directory", file, state, true},
	} {
		var logs bytes.Buffer
		m := NewCapacityMeter(zero, tc.dataRoot, state, slog.New(slog.NewTextHandler(&logs, nil)))
		if dir, onRoot := m.DiskDir(); dir != tc.want || onRoot != (tc.want == root) {
			t.Errorf("%s: disk measured on %s (data root %t), want %s", tc.name, dir, onRoot, tc.want)
		}
		for range 3 {
			if c := m.Measure(); c.DiskFreeBytes <= 0 || c.CPUMillis <= 0 || c.MemoryBytes <= 0 {
				t.Errorf("%s: capacity %+v", tc.name, c)
			}
		}
		if n := strings.Count(logs.String(), DiagnosticDataRootNotVisible); n != map[bool]int{true: 1}[tc.diagnostic] {
			t.Errorf("%s: diagnostic logged %d times over three reports:\n%s", tc.name, n, logs.String())
		}
	}
}

// TestCapacityMeterLogsVisibilityChanges: a data root that appears and
// disappears is logged at each change, not at each report.
func TestCapacityMeterLogsVisibilityChanges(t *testing.T) {
	state, root := t.TempDir(), filepath.Join(t.TempDir(), "root")
	var logs bytes.Buffer
	m := NewCapacityMeter(CapacityPolicy{}, root, state, slog.New(slog.NewTextHandler(&logs, nil)))
	m.Measure()
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	m.Measure()
	m.Measure()
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	m.Measure()
	m.Measure()
	if n := strings.Count(logs.String(), DiagnosticDataRootNotVisible); n != 2 {
		t.Fatalf("diagnostic logged %d times, want 2:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "data root again"); n != 1 {
		t.Fatalf("recovery logged %d times, want 1:\n%s", n, logs.String())
	}
}
