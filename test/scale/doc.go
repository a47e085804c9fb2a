// Package scale is the scale simulator of issue 13, item P5 (`make
// bench-scale`): BERTH_SCALE_NODES node agents (default 1,000) against one
// real berth-core and PostgreSQL holding BERTH_SCALE_ALLOCATIONS
// allocations (default 100,000). It prints one table (measure, p50, p99,
// value, goal) and writes it as JSON to .run/scale.json.
//
// What is real:
//   - berth-core is the binary the stack package builds, at its default
//     settings (no flag beyond addresses and paths; the Runtime gateway
//     served over TLS from the installation CA, though no Runtime
//     connects), on its own fresh database of the test PostgreSQL. The
//     table's header says so from Core's argv (stack.Settings), and the
//     benchmark refuses to run otherwise.
//   - Every node agent is the node agent's own gRPC server
//     (nodeagent.NewServer behind nodeagent.NewGRPCServer, what
//     berth-nodeagent serves: metadata checks, the owner-epoch fence, the
//     Connect health stream, the wire error codec, keepalive enforcement),
//     each with its own state directory, listening on its own loopback
//     port, enrolled through Core's public enrollment API with a fresh
//     token from the admin API (nodeagent.Enroll, as `berth-nodeagent
//     enroll` does), so Core dials each over mutual TLS with a certificate
//     its installation CA issued, and verifies it. Nodes are enabled
//     through the admin API.
//   - Sessions are created and read through the admin API by concurrent
//     clients, placed by Core, and their Creates sent by Core's lifecycle
//     workers over the node protocol.
//
// What is simulated, and why:
//   - All node agents run in this test process (one process instead of a
//     thousand: a thousand berth-nodeagent processes would not fit beside
//     Core and PostgreSQL on a two-core machine).
//   - Behind each agent is memprovider (test/internal/memprovider), an
//     in-memory adapter, instead of a Docker Engine. It announces the
//     committed deployment's provider kind (docker) with the deployment
//     digest Core expects, a backend fingerprint of its own and a fixed,
//     large capacity, so that Core binds, readies and places on it; its
//     declaration is its own (the required operations, nothing else).
//   - The background population is written straight into Core's tables
//     with COPY (seed_test.go): per allocation a Session, its ready
//     Environment, an active placement and a running allocation whose
//     Create settled, spread evenly over the nodes, last observed at
//     times spread over the last ten seconds; each node's adapter adopts
//     its allocations' References, so Core's observations find them
//     running. Seeding 100,000 through CreateSession would take the run
//     far longer than the measures; the rows are those CreateSession and a
//     settled Create write, less the sealed device credential (NULL, which
//     the schema allows; no Runtime connects here).
//
// The table lists under it what is not simulated (no Runtime connects,
// the in-memory adapter answers at once, the agents share one process),
// so that no figure is read as more than it is; a p99 of fewer than 100
// samples is printed as "max".
//
// Measures (each reported, none asserted; goals from the issue):
//   - page scan: for every node, the first page (store.NodePageSize) of
//     each of the three scans a lifecycle worker's pass runs
//     (ListPendingForNode, ListAllocationsForNode, ListObservableForNode),
//     timed through core/store's own methods against the live database
//     while Core runs; goal: a pass's three pages p99 under 10 ms;
//   - CreateSession: BERTH_SCALE_CREATES calls (default 5,000) from
//     BERTH_SCALE_CLIENTS concurrent admin clients (default 32), latency
//     p50/p99 and throughput; goal at least 500/s. The run then waits
//     until every created Session's Create reached its node's adapter;
//   - admin GetSession (random seeded Sessions) and ListSessions (page
//     size 100, first page and following pages), one call at a time;
//   - berth-core's RSS (VmRSS, VmHWM) and threads from /proc/<pid>/status,
//     CPU (user + system, /proc/<pid>/stat) over a steady window with the
//     population only and over the CreateSession phase; goal RSS under
//     300 MB.
//
// TestScaleSmoke runs the same code small (5 nodes, 200 allocations, 50
// creations) inside `make test`, so the simulator cannot rot; it checks
// only that every created Session's Create reached its node.
package scale
