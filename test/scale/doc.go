// Package scale is the scale simulator of issue 13, item P5 (`make
// bench-scale`): BERTH_SCALE_NODES node agents (default 1,000) against one
// real berth-core and PostgreSQL holding BERTH_SCALE_ALLOCATIONS
// allocations (default 100,000); BERTH_SCALE_PROJECTS spreads the creates
// over that many projects (default 1). It prints one table (measure, p50, p99,
// value, goal) and writes it as JSON to .run/scale.json. docs/scale.md
// says what is real, what is simulated and why, and each measure.
//
// Rules:
//   - berth-core runs at its default settings, on its own fresh database;
//     the table's header says so from Core's argv (stack.Settings) and the
//     benchmark refuses to run otherwise.
//   - Every node agent is the node agent's own gRPC server, enrolled
//     through Core's public enrollment API and dialled over mutual TLS;
//     only the process (all agents in this one) and the adapter
//     (test/internal/memprovider) are simulated.
//   - The background population is seeded with COPY as the rows
//     CreateSession and a settled Create write (less the device
//     credential); the measured Sessions go through the admin API.
//   - Measures are reported, none asserted; the table lists under it what
//     is not simulated, and a p99 of fewer than 100 samples prints "max".
//   - TestScaleSmoke runs the same code small inside `make test`, so the
//     simulator cannot rot.
package scale
