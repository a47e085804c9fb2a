// Package daemon composes berth-core serve. Run builds Core from named
// steps, in this order: checkConfig, lockStateDir, setupMetrics (the
// metrics endpoint and the process's MeterProvider, only with
// MetricsListen), loadSecrets (master key and admin token), openStore (migrate when asked, refuse an unknown
// schema), claimInstallation (and a new owner epoch), holdLease (a second
// Core waits here), setupEvents (the change bus, core/events, and its
// LISTEN feed), loadCA (the installation CA, its key sealed under the
// master key, and Core's own certificates), setupNodes (the node
// connections), setupTurns (the Turn service and its sweep),
// setupSessions (the Session service), setupLifecycle (one serial worker
// per node; a drain past its bound closes the Session service's
// admission), setupGateway (the Runtime gateway, berth.runtime.v1),
// setupAdmin (the admin API, loopback only)
// setupEnrollment (node enrollment on the mutual-TLS public listener)
// and observeCore (the gauges of Core's state, metrics.go).
// defaults.go holds every default of Config and of the command's flags.
//
// Rules:
//   - Each step registers what it opened, and the servers and workers it
//     leaves running, on one shutdown path; Run runs the servers and
//     workers under one errgroup, and the first failure, a lost execution
//     lease or the end of the context stops everything once, in the
//     reverse order of the steps. No error path closes anything by hand.
//   - The lease is released only after everything that ran under it has
//     stopped, and losing it stops Core (ErrLeaseLost).
//   - The lease is held through the owner lock (store.OwnerLock, a
//     PostgreSQL advisory lock on a connection of its own): a standby
//     waits on the lock and takes a locked lease over the moment the
//     active Core's lock connection ends, its death or its planned stop
//     (the lock closes after the lease's release). The lock only speeds a
//     takeover up: without it the lease's expiry still decides, and the
//     owner epoch still fences a deposed Core's writes.
//   - Components signal a change only on the bus (core/events); Run sets
//     no callbacks between them: it subscribes where a change crosses
//     components (route) and passes synchronous dependencies (a drain
//     gate, a node observer, admission) as constructor arguments.
//   - The admin token, master key and CA key never reach a log line, an
//     error, a span or a metric label; every lifecycle decision reads the
//     database clock.
//   - Telemetry goes through the OpenTelemetry API only (platform/otelsetup
//     installs the providers: traces from the OTEL_* environment in
//     cmd/berth-core, metrics here): without them every instrument and
//     span is a no-op.
package daemon
