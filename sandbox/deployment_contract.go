package sandbox

import (
	"fmt"
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

// The reasons of the shared bounds' refusals: each says the bounds it
// enforces, so an operator can correct the value without reading the
// code.
var (
	cpuOutOfBounds         = fmt.Sprintf("out of bounds: at least %d and at most %d millicores", MinCPUMillis, MaxCPUMillis)
	memoryOutOfBounds      = "out of bounds: at least " + byteCount(MinMemoryBytes) + " and at most " + byteCount(MaxMemoryBytes)
	diskOutOfBounds        = "out of bounds: at least " + byteCount(MinDiskBytes) + " and at most " + byteCount(MaxDiskBytes)
	maxActiveOutOfBounds   = fmt.Sprintf("out of bounds: at least %d and at most %d", MinMaxActive, MaxMaxActive)
	maxRetainedOutOfBounds = fmt.Sprintf("out of bounds: at least 0 and at most %d", MaxMaxRetained)
	// SuspendIdleOutOfBounds and RetentionOutOfBounds are the reasons of
	// a suspension policy's idle time and retention out of bounds, also
	// for an adapter that refuses a duration before Validate sees it.
	SuspendIdleOutOfBounds = "out of bounds: whole seconds, at least " + duration(MinSuspendIdle) + " and at most " + duration(MaxSuspendIdle)
	RetentionOutOfBounds   = "out of bounds: whole seconds, at least " + duration(MinRetention) + " and at most " + duration(MaxRetention)
)

// duration writes d in its largest whole unit, days only beyond one:
// "1 minute", "24 hours", "90 days".
func duration(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d > day && d%day == 0:
		return plural(int64(d/day), "day")
	case d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	}
	return plural(int64(d/time.Second), "second")
}

// byteCount writes n in its largest whole binary unit: "128 MiB".
func byteCount(n int64) string {
	for _, u := range []struct {
		unit int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n%u.unit == 0 {
			return fmt.Sprintf("%d %s", n/u.unit, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// plural writes n and name, with an s unless n is 1.
func plural(n int64, name string) string {
	if n == 1 {
		return "1 " + name
	}
	return fmt.Sprintf("%d %ss", n, name)
}

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
		return errdefs.Invalid("resources.cpu_millis", cpuOutOfBounds)
	case r.MemoryBytes < MinMemoryBytes || r.MemoryBytes > MaxMemoryBytes:
		return errdefs.Invalid("resources.memory_bytes", memoryOutOfBounds)
	case r.DiskBytes < MinDiskBytes || r.DiskBytes > MaxDiskBytes:
		return errdefs.Invalid("resources.disk_bytes", diskOutOfBounds)
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
		return errdefs.Invalid("suspension.idle", SuspendIdleOutOfBounds)
	}
	if !FitsRuntimeDuration(p.Retention, MinRetention, MaxRetention) {
		return errdefs.Invalid("suspension.retention", RetentionOutOfBounds)
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
		return errdefs.Invalid("specification.max_active", maxActiveOutOfBounds)
	}
	if s.MaxRetained < 0 || s.MaxRetained > MaxMaxRetained {
		return errdefs.Invalid("specification.max_retained", maxRetainedOutOfBounds)
	}
	if !s.Suspension.IsZero() {
		if err := s.Suspension.Validate(); err != nil {
			return err
		}
	}
	return nil
}
