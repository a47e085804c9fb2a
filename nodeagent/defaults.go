package nodeagent

import "time"

// Every default and time bound of berth-nodeagent lives here: a missing
// optional field of the configuration file takes its default from here,
// and so does the command's --config flag, whose default --help shows.

// DefaultConfigFile is the configuration file serve and enroll read when
// --config is not given: the FHS place of a host's configuration, beside
// the other Berth files in /etc/berth.
const DefaultConfigFile = "/etc/berth/nodeagent.json"

// DefaultHealthInterval is the health report period when the
// configuration sets none: a report every 10 s keeps the node well inside
// Core's 45 s presence window even when three reports in a row are lost,
// at one adapter probe per report.
const DefaultHealthInterval = 10 * time.Second

// MinHealthInterval and MaxHealthInterval bound the configured health
// report period. Core counts a node present only while its latest report
// arrived less than 45 s ago (the database's presence predicate, which
// placement and the admin API share), so a period must leave room for a
// late or lost report inside that window: at most 30 s. A longer one
// would make a healthy node absent for part of every period.
const (
	MinHealthInterval = 100 * time.Millisecond
	MaxHealthInterval = 30 * time.Second
)

// MaxOperationTime bounds an operation whose caller sent no deadline.
const MaxOperationTime = 10 * time.Minute

// CreateGrace is how long a started Create goes on after its caller went
// away (see runTracked).
const CreateGrace = 5 * time.Second

// BatchReads bounds how many of one ObserveBatch's targets are read from
// the adapter at once. A target waiting for its allocation's turn (a
// Create or a Suspend under way) holds no slot, so one busy allocation
// never delays the others' reads; eight concurrent engine reads keep a
// page of 32 within a few of one read's time without flooding the engine.
const BatchReads = 8

// BatchMargin keeps 1/BatchMargin of an ObserveBatch call's remaining
// time from its targets, so that the answer, with a per-target deadline
// error for a target still waiting, reaches Core before its deadline ends
// the whole call.
const BatchMargin = 8

// EnrollTimeout bounds `berth-nodeagent enroll`: one dial to Core and one
// call. Core answers at once or not at all, so waiting longer only delays
// the operator's error.
const EnrollTimeout = time.Minute

const (
	// adapterBuildTimeout bounds the construction of a published
	// generation's adapter (it may reach its engine and check its image):
	// a hung engine reports the generation not built instead of hanging
	// ServeGenerations.
	adapterBuildTimeout = time.Minute

	// probeTimeout bounds one readiness probe, run for every health report:
	// a probe that hangs reports the node not ready instead of holding
	// the report back.
	probeTimeout = 10 * time.Second

	// housekeepTimeout bounds one adapter upkeep pass (Built.Housekeep),
	// run after the probe of every health report: a hung engine leaves
	// the receipts counted as before instead of holding the report back.
	housekeepTimeout = 10 * time.Second

	// gracefulStopTimeout is how long calls in flight get to finish at
	// shutdown (the Connect streams end at once) before the server stops
	// hard. A call the hard stop cuts off is an unknown outcome that Core
	// records and only observes afterwards, so a stop need not wait for a
	// long operation to end.
	gracefulStopTimeout = 10 * time.Second

	// metricsStopTimeout is how long scrapes in flight get at shutdown
	// before the metrics endpoint closes: a scrape reads only memory.
	metricsStopTimeout = 2 * time.Second
)

// The host reserve: what the node keeps back from sandboxes for the kernel,
// the engine (dockerd, containerd and one shim per sandbox), the node agent
// and the host's own daemons. A reserve the configuration does not set
// (capacity.reserve.*) is DefaultReserve of its floor and the host's total:
// the larger of a fixed floor, which covers what a host needs however small
// it is, and DefaultReservePercent of the total, which covers what grows
// with the host (more sandboxes per host mean more shims, more page tables,
// more engine metadata). A reserve set explicitly, even 0, is used as is.
const (
	// DefaultReserveCPUMillis: half a core. The engine and the agent idle
	// well below it, but container starts, image unpacking and health
	// probes burst; without it sandboxes at their quota starve the engine
	// and its calls time out, which Core sees as unknown outcomes.
	DefaultReserveCPUMillis = 500
	// DefaultReserveMemoryBytes: 1 GiB. The kernel, dockerd and containerd
	// (a few hundred MiB together), the agent and the shims; memory is the
	// one resource whose exhaustion is not slowness but the OOM killer,
	// which may pick the engine.
	DefaultReserveMemoryBytes = 1 << 30
	// DefaultReserveDiskBytes: 5 GiB of the measured filesystem. Images,
	// container logs and the engine's metadata grow outside any sandbox's
	// quota, and an engine that hits ENOSPC fails every sandbox's writes
	// at once and may corrupt its own state.
	DefaultReserveDiskBytes = 5 << 30
	// DefaultReservePercent is the share of the host's total CPU, memory
	// and disk size (not free space) kept back when it exceeds the floor.
	DefaultReservePercent = 10
)

// DefaultReserve is the default reserve of a resource whose host total is
// total: the larger of floor and DefaultReservePercent of total.
func DefaultReserve(floor, total int64) int64 {
	return max(floor, total/100*DefaultReservePercent)
}

// CPU overcommit (capacity.cpu_overcommit): the reported CPU is the CPU
// net of the reserve times the factor. Sandboxes are mostly idle between
// Turns and their CPU is a CFS quota (a ceiling, not a reservation), so an
// operator may trade latency under contention for density. The default
// promises only real CPU; the bounds keep a typo from promising a hundred
// times the host. Memory has no such factor: an overcommitted memory limit
// is paid for with the OOM killer, not with slowness.
const (
	DefaultCPUOvercommit = 1.0
	MinCPUOvercommit     = 1.0
	MaxCPUOvercommit     = 16.0
)
