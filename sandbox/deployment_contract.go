package sandbox

import (
	"time"

	"berth.dev/sandbox/errdefs"
)

// The shared field bounds of a deployment specification. Provider
// validators may narrow them, never widen them.
const (
	MinCPUMillis    = 100
	MaxCPUMillis    = 64_000
	MinMemoryBytes  = 128 << 20
	MaxMemoryBytes  = 256 << 30
	MinDiskBytes    = 1 << 30
	MaxDiskBytes    = 4 << 40
	MinMaxActive    = 1
	MaxMaxActive    = 1024
	MaxMaxRetained  = 4096
	MinSuspendIdle  = time.Minute
	MaxSuspendIdle  = 24 * time.Hour
	MinRetention    = time.Hour
	MaxRetention    = 90 * 24 * time.Hour
	durationQuantum = time.Second
)

var invalidBootstrap = errdefs.Invalid("bootstrap", "invalid runtime bootstrap file")

var invalidCoreCA = errdefs.Invalid("core_ca_pem", "must be empty or PEM CA certificates")

// Resources are the per-sandbox limits of a deployment.
type Resources struct {
	CPUMillis   int64
	MemoryBytes int64
	DiskBytes   int64
}

// Validate checks the shared bounds.
func (r Resources) Validate() error {
	switch {
	case r.CPUMillis < MinCPUMillis || r.CPUMillis > MaxCPUMillis:
		return errdefs.Invalid("resources.cpu_millis", "out of bounds")
	case r.MemoryBytes < MinMemoryBytes || r.MemoryBytes > MaxMemoryBytes:
		return errdefs.Invalid("resources.memory_bytes", "out of bounds")
	case r.DiskBytes < MinDiskBytes || r.DiskBytes > MaxDiskBytes:
		return errdefs.Invalid("resources.disk_bytes", "out of bounds")
	}
	return nil
}

// SuspensionPolicy sets the idle time before suspension and the snapshot
// retention. The zero value means no suspension.
type SuspensionPolicy struct {
	Idle      time.Duration
	Retention time.Duration
}

// IsZero reports whether p configures no suspension.
func (p SuspensionPolicy) IsZero() bool { return p == SuspensionPolicy{} }

// Validate checks that both durations are whole seconds within the Runtime
// duration bounds.
func (p SuspensionPolicy) Validate() error {
	if !FitsRuntimeDuration(p.Idle, MinSuspendIdle, MaxSuspendIdle) {
		return errdefs.Invalid("suspension.idle", "out of bounds")
	}
	if !FitsRuntimeDuration(p.Retention, MinRetention, MaxRetention) {
		return errdefs.Invalid("suspension.retention", "out of bounds")
	}
	return nil
}

// FitsRuntimeDuration reports whether d is a whole number of seconds in
// [lo, hi].
func FitsRuntimeDuration(d, lo, hi time.Duration) bool {
	return d >= lo && d <= hi && d%durationQuantum == 0
}

// Specification is the deployment's sizing: per-sandbox resources, the
// per-node counts and the suspension policy.
type Specification struct {
	Resources   Resources
	MaxActive   int32
	MaxRetained int32
	Suspension  SuspensionPolicy
}

// Validate checks the shared bounds.
func (s Specification) Validate() error {
	if err := s.Resources.Validate(); err != nil {
		return err
	}
	if s.MaxActive < MinMaxActive || s.MaxActive > MaxMaxActive {
		return errdefs.Invalid("specification.max_active", "out of bounds")
	}
	if s.MaxRetained < 0 || s.MaxRetained > MaxMaxRetained {
		return errdefs.Invalid("specification.max_retained", "out of bounds")
	}
	if !s.Suspension.IsZero() {
		if err := s.Suspension.Validate(); err != nil {
			return err
		}
	}
	return nil
}
