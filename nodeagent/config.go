package nodeagent

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"time"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/strictjson"
)

// Config is the node agent's configuration file.
type Config struct {
	// StateDir is the private state directory (absolute).
	StateDir string `json:"state_dir"`
	// Listen is the address the gRPC server binds ("host:port").
	Listen string `json:"listen"`
	// Provider is the registered provider kind of this node's adapter.
	Provider string `json:"provider"`
	// Node is the adapter's node-local configuration, decoded strictly by
	// the adapter.
	Node json.RawMessage `json:"node"`
	// Generation is refused when present: the generations a node serves
	// come from Core over the node protocol (ServeGenerations), never
	// from the node's file. A file written for an older node agent
	// fails with a message that says so instead of serving a stale one.
	Generation json.RawMessage `json:"generation,omitempty"`
	// HealthInterval is the period of health reports, a Go duration such
	// as "10s" (DefaultHealthInterval when empty), between
	// MinHealthInterval and MaxHealthInterval.
	HealthInterval string `json:"health_interval,omitempty"`
	// Capacity tunes the capacity the node reports (the host reserve and
	// the CPU overcommit); every field is optional (defaults.go).
	Capacity CapacityConfig `json:"capacity,omitzero"`
	// MetricsListen is the address ("host:port") of the Prometheus metrics
	// endpoint (GET /metrics, plain HTTP): the node protocol's calls by
	// method and code, the generations served and ready, the operations
	// in flight. Empty (the default): no metrics, no listener.
	MetricsListen string `json:"metrics_listen,omitempty"`

	// Version is the node agent's build version, which telemetry reports;
	// the command sets it, the file never does.
	Version string `json:"-"`
}

// CapacityConfig is the capacity section of the configuration file.
type CapacityConfig struct {
	// Reserve is what the node keeps back for the host; a field left out
	// takes its default rule (DefaultReserve), one set, even 0, is used.
	Reserve ReserveConfig `json:"reserve,omitzero"`
	// CPUOvercommit multiplies the CPU net of the reserve, between
	// MinCPUOvercommit and MaxCPUOvercommit (DefaultCPUOvercommit when
	// left out).
	CPUOvercommit *float64 `json:"cpu_overcommit,omitempty"`
}

// ReserveConfig is the host reserve, each field optional and non-negative.
type ReserveConfig struct {
	CPUMillis   *int64 `json:"cpu_millis,omitempty"`
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
	DiskBytes   *int64 `json:"disk_bytes,omitempty"`
}

// Policy converts the section to the measurement's policy.
func (c CapacityConfig) Policy() CapacityPolicy {
	p := CapacityPolicy{
		ReserveCPUMillis:   c.Reserve.CPUMillis,
		ReserveMemoryBytes: c.Reserve.MemoryBytes,
		ReserveDiskBytes:   c.Reserve.DiskBytes,
		CPUOvercommit:      DefaultCPUOvercommit,
	}
	if c.CPUOvercommit != nil {
		p.CPUOvercommit = *c.CPUOvercommit
	}
	return p
}

// Validate refuses a negative reserve and an overcommit out of bounds.
func (c CapacityConfig) Validate() error {
	for _, r := range []struct {
		field string
		v     *int64
	}{
		{"config.capacity.reserve.cpu_millis", c.Reserve.CPUMillis},
		{"config.capacity.reserve.memory_bytes", c.Reserve.MemoryBytes},
		{"config.capacity.reserve.disk_bytes", c.Reserve.DiskBytes},
	} {
		if r.v != nil && *r.v < 0 {
			return errdefs.Invalid(r.field, "must not be negative")
		}
	}
	if f := c.CPUOvercommit; f != nil && !(*f >= MinCPUOvercommit && *f <= MaxCPUOvercommit) {
		return errdefs.Invalid("config.capacity.cpu_overcommit", "must be between 1 and 16")
	}
	return nil
}

// Interval returns the health report period.
func (c Config) Interval() time.Duration {
	d, err := time.ParseDuration(c.HealthInterval)
	if err != nil || d <= 0 {
		return DefaultHealthInterval
	}
	return d
}

// LoadConfig reads and strictly decodes a configuration file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, errdefs.Invalid("config", "cannot read the configuration file")
	}
	return DecodeConfig(data)
}

// DecodeConfig strictly decodes and validates a configuration.
func DecodeConfig(data []byte) (Config, error) {
	var c Config
	if err := strictjson.Decode(data, &c, 256<<10); err != nil {
		return Config{}, errdefs.Invalid("config", err.Error())
	}
	return c, c.Validate()
}

// Validate checks the configuration's own fields; the adapter validates
// Node and the registry the specification.
func (c Config) Validate() error {
	if !filepath.IsAbs(c.StateDir) || filepath.Clean(c.StateDir) != c.StateDir {
		return errdefs.Invalid("config.state_dir", "must be a clean absolute path")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return errdefs.Invalid("config.listen", "must be host:port")
	}
	if c.Provider == "" {
		return errdefs.Invalid("config.provider", "required")
	}
	if len(c.Node) == 0 {
		return errdefs.Invalid("config.node", "required")
	}
	if c.Generation != nil {
		return errdefs.Invalid("config.generation", "generations come from Core over the node protocol: remove this block")
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return errdefs.Invalid("config.metrics_listen", "must be host:port")
		}
	}
	if c.HealthInterval != "" {
		if d, err := time.ParseDuration(c.HealthInterval); err != nil || d < MinHealthInterval || d > MaxHealthInterval {
			return errdefs.Invalid("config.health_interval", "must be a duration between 100ms and 30s")
		}
	}
	return c.Capacity.Validate()
}
