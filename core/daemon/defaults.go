package daemon

import (
	"berth.dev/core/audit"
	"time"

	runtimev1 "berth.dev/proto/berth/runtime/v1"

	"berth.dev/core/gateway"
	"berth.dev/core/lifecycle"
)

// Every default of berth-core serve lives here: Config.withDefaults fills
// a zero field from it and the command's flags take their defaults from it,
// so `berth-core serve --help` shows what Core runs with. Where a package
// Core composes has its own default for the same setting, the constant
// here is that package's, so the two cannot disagree. Bounds that belong
// to one package's own rules and that no flag sets (the gateway's hello
// wait, Turn timeouts, the admin API's unary deadline, the node presence
// window) stay with their package.

// listenRetry is the pause before listening for events again after
// the listening connection failed (a database restart): the periodic
// scan covers the gap.
const listenRetry = time.Second

// Bounds of the metrics endpoint (--metrics-listen; metrics.go).
const (
	// metricsRefresh is how old the Session and allocation counts may be
	// when a scrape reads them: those two queries run at most once per
	// refresh whatever the number of scrapers, and a count lags the
	// database by at most this much (Prometheus scrapes every 15 s by
	// default).
	metricsRefresh = 5 * time.Second
	// metricsQueryTimeout bounds those queries: a slow database makes the
	// counts missing from one scrape, never a hung scrape.
	metricsQueryTimeout = 2 * time.Second
	// metricsStopTimeout bounds the flush of the MeterProvider at stop.
	metricsStopTimeout = 2 * time.Second
	// httpStopTimeout is how long the metrics endpoint's requests in flight
	// get at stop before it closes.
	httpStopTimeout = 2 * time.Second
)

// Defaults of Config (and of the flags of the same name).
const (
	// DefaultStateDir is where a packaged Core keeps its admin token, master
	// key and lock: the FHS place of a daemon's persistent state.
	DefaultStateDir = "/var/lib/berth-core"

	// DefaultAdminListen is loopback because the admin API is plaintext and
	// the bearer token crosses in every call (Run refuses any other host);
	// port 7000 sits apart from the public 7443.
	DefaultAdminListen = "127.0.0.1:7000"

	// DefaultListen is the public listener (node enrollment over TLS) on
	// every interface: nodes on other hosts dial it, and docs/grpcurl.md's
	// `berth-nodeagent enroll --core HOST:7443` names this port.
	DefaultListen = ":7443"

	// DefaultLeaseTTL is how long a standby Core waits for an active Core
	// that died without releasing the lease (a crash, a partition) before it
	// takes over. The lease is renewed every third of it (5 s), so two
	// renewals in a row may fail (a database restart) before it lapses.
	DefaultLeaseTTL = 15 * time.Second

	// DefaultNodeInterval is how often Core reconciles its node connections
	// and lifecycle workers with the store: how soon a newly enabled node is
	// dialled and gets its worker, and a disabled one is dropped. Each pass
	// pages through every node, so it runs no more often than that needs.
	DefaultNodeInterval = 5 * time.Second

	// DefaultLifecycleInterval is the wait between a node worker's passes
	// when nothing wakes it: it bounds how long a new Session waits for its
	// Create and a deleted one for its cleanup, at a few indexed queries per
	// node and pass. 2 s is what berth-core has always run with (the
	// --lifecycle-interval flag's default); lifecycle.DefaultInterval, used
	// when a lifecycle.Config leaves Interval zero, is the same value.
	DefaultLifecycleInterval = lifecycle.DefaultInterval

	// DefaultCreateAbandonAfter is how long a Create's outcome may stay
	// unknown (its answer lost, not observed running) before the worker
	// abandons it and the Session gets a new allocation (the
	// --create-abandon-after flag's default; see
	// lifecycle.DefaultCreateAbandonAfter for why a minute).
	DefaultCreateAbandonAfter = lifecycle.DefaultCreateAbandonAfter

	// DefaultQuiesceTimeout is how long an armed suspension waits for the
	// Runtime's acknowledgement before it is aborted (the --quiesce-timeout
	// flag's default; lifecycle.DefaultQuiesceTimeout says why a minute).
	DefaultQuiesceTimeout = lifecycle.DefaultQuiesceTimeout

	// DefaultRestoreAbandonAfter is how long a restore's outcome may stay
	// unknown, with the attempt's incarnation observed not running, before
	// it is abandoned: that incarnation is removed by its id and only then
	// is the restore done into a later one (the --restore-abandon-after
	// flag's default). A restore whose observation fails or finds nothing
	// is never abandoned (lifecycle/suspend.go).
	DefaultRestoreAbandonAfter = lifecycle.DefaultRestoreAbandonAfter

	// DefaultAuditRetention is how long audit events are kept (90 days;
	// the --audit-retention flag's default, at least audit.MinRetention).
	DefaultAuditRetention = audit.DefaultRetention

	// DefaultObservePeriod bounds how long a running Session's compute goes
	// unobserved, so how long a container stopped or removed from outside
	// is still reported available: at most this long (10 s, see
	// lifecycle.DefaultObservePeriod for why). It is the lifecycle
	// package's own default, so the two cannot disagree.
	DefaultObservePeriod = lifecycle.DefaultObservePeriod

	// DefaultComputeKeepalive is the wait between service keepalives
	// (provider Renew) to connected, running compute between Turns (5 min,
	// see lifecycle.DefaultKeepaliveInterval): well inside the one-hour
	// lapse after which keepalives stop for good.
	DefaultComputeKeepalive = lifecycle.DefaultKeepaliveInterval

	// DefaultRuntimeKeepalive is the interval of the gateway's keepalives
	// to idle Runtimes, the gateway's own default (gateway.DefaultKeepalive,
	// 15 s): a Runtime that leaves three unanswered is disconnected, so a
	// dead one holds its Session's connection for under a minute while an
	// idle one costs one small message per interval.
	DefaultRuntimeKeepalive = gateway.DefaultKeepalive
)

// Fixed settings of the running Core (no flag sets them).
const (
	// runtimePingMinTime is the shortest interval between HTTP/2 pings the
	// Runtime gateway accepts from a client, idle streams included. It is
	// below the Runtime's own 20 s transport pings (runtimeclient), so those
	// are never refused as too_many_pings, while a client pinging faster is.
	runtimePingMinTime = 10 * time.Second

	// certificateValidity is the lifetime of Core's own client (node dials)
	// and server (enrollment) certificates, issued afresh from the
	// installation CA at every start. Nothing renews them while Core runs,
	// so a Core must restart within this period; short enough that a
	// leaked certificate does not outlive a month.
	certificateValidity = 30 * 24 * time.Hour

	// publicMaxHeaderListBytes and runtimeMaxHeaderListBytes bound a call's
	// header block on the public (enrollment) listener and the Runtime
	// gateway, as admin.MaxHeaderListBytes does on the admin API (see it
	// for why 16 KiB): both face callers Core has not authenticated yet,
	// and grpc-go's own default is 16 MiB. Their legitimate headers are a
	// few hundred bytes (the Runtime's device id and credential, grpc-go's
	// own, a trace context).
	publicMaxHeaderListBytes  = 16 << 10
	runtimeMaxHeaderListBytes = 16 << 10

	// publicMaxRecvMsgBytes bounds an enrollment request: a token, a CSR
	// in DER (under 2 KiB for Core's key types) and an address. 64 KiB is
	// far past that and keeps an unenrolled caller's message small
	// (grpc-go's default is 4 MiB).
	publicMaxRecvMsgBytes = 64 << 10

	// runtimeMaxRecvMsgBytes bounds one Runtime message. The largest is a
	// Transfer stream's data message of up to runtimev1.MaxTransferChunk
	// (1 MiB) of a file; 64 KiB more leaves room for framing while a
	// Runtime cannot make Core buffer grpc-go's default 4 MiB per message.
	runtimeMaxRecvMsgBytes = runtimev1.MaxTransferChunk + 64<<10

	// leaseReleaseTimeout bounds the release of the execution lease at
	// shutdown. Releasing lets a standby take over at once instead of after
	// the lease TTL, but the database may be why Core is stopping, so the
	// release is given only this long.
	leaseReleaseTimeout = 5 * time.Second
)
