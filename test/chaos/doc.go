// Package chaos is Berth's fault-injection suite (issue #7): it drives a
// real berth-core, several real berth-nodeagent processes, PostgreSQL and
// the Docker Engine through the admin API, injects faults (SIGKILL and
// SIGSTOP of processes, a cut TCP path between Core and a node or between
// the Runtimes and Core, a PostgreSQL restart or its connection slots
// exhausted or its clock 10 minutes off Core's (libfaketime on the
// server), a standby Core taking over, a flood of bad hellos and
// malformed admin requests, a read-only node state directory, the engine's
// data root full (a private engine on a tmpfs), foreign
// resources with colliding names, replayed enrollment tokens, a node
// presenting another node's certificate) and after each scenario checks
// the invariants against the engine and the database, through observers
// independent of Berth's own report where one exists (the engine's event
// log and container list, Turn side effects). An observer that cannot
// read fails the scenario: only the engine's NotFound means a resource is
// gone or a Turn left no file, and an engine read (inspect, copy, list)
// that fails otherwise is a violation or a fatal error, never taken for
// absence, and the event count waits until the stream has delivered a
// marker volume's create instead of sleeping:
//
//   - I1: no allocation had more than one container or volume set created
//     (counted from the engine's event log, so a Create replayed after a
//     cleanup is seen even though it left nothing behind), and no Session
//     had more than one allocation that ran or more than
//     store.MaxCreateAttempts allocations (a new one follows only a Create
//     that ended without compute);
//
//   - I2: after the Sessions are deleted every allocation is RELEASED with
//     its creation settled, and nothing labelled with the installation or
//     named as one of its allocations' resources remains on the engine
//     but tombstones (checkEngineLeaks, from the engine's event log);
//
//   - I3: no resource with foreign labels is ever removed;
//
//   - I4: every Turn ends with its exact output and exit code 0, or with a
//     clear failure (a failure code, cancelled, timed out, unconfirmed),
//     within its deadline, and none runs twice: each Turn reports itself
//     to a host-side witness and appends a workspace line, and the checker
//     counts both (witness_test.go);
//
//   - I5: healthy nodes keep serving while another one is faulty: each of
//     their Sessions created during the fault is ACTIVE within its
//     deadline, and the median of their create-to-ACTIVE latency during
//     the fault is at most i5Bound (3) times the median before it, or
//     grew by at most i5Margin (5 s) (reportI5; samples are required).
//     Why 3: a healthy node stalled by the faulty one has its serial
//     worker queued behind a stuck call, which waits for the call's bound
//     (2 minutes): a deadline miss or a ratio of tens, and a partial stall
//     that lasts shows as several times; noise does not reach 3, since on
//     this suite's 2-core machine beside other suites the median of a few
//     half-second Creates moves by up to 1.5x without any fault
//     (quiet-machine ratios were 0.98-1.10). Why 5 s too: 3x of half a
//     second is a burst of the suites beside, while the shortest stall a
//     faulty node could pass on is its detection (a keepalive timeout,
//     about 13 s).
//
//   - I6: every Session a fault touched, created before or during it,
//     ends ACTIVE (its allocation ACTIVE with its Create settled, a
//     running container on the engine, its Runtime connected to Core
//     where the cluster serves the gateway) or FAILED with a recorded
//     failure code within its deadline after the repair (requireOutcomes:
//     a Core crash, a PostgreSQL crash, a cut Core-node path, a node agent
//     killed or the engine crashed during a Create, foreign resources
//     taking an allocation's names, and at the soak's end). The latency
//     samples count: those placed on the faulty node, which I5 does not
//     wait for, are checked with the rest; so does a Session Core lists
//     although its CreateSession answered an error (a PostgreSQL fault may
//     cut the answer, not the commit) or its deletion was refused (the
//     soak): withPresent adds them. Where nothing may fail a
//     Session (a node only stuck or absent for a while, a node presenting
//     another's certificate, the healthy node of the retired-node
//     scenario, Sessions that ran through Turn faults) it must end ACTIVE
//     by the same reading (requireActive). Sessions whose container the
//     engine's restart stopped report exactly that (compute_stopped, from
//     the engine's own state too). A Create a fault left unknown is
//     abandoned after lifecycle.DefaultCreateAbandonAfter and its Session
//     gets a new allocation, so the deadline is that plus activeDeadline
//     (outcomeDeadline). Sessions a scenario deletes are checked by the
//     cleanup checks (I1, I2) instead.
//
// Refusals are checked by their exact gRPC code and ErrorInfo domain and
// reason (refusal_test.go), never only counted: during the PostgreSQL
// restart and with its slots taken, CreateSession is refused only with
// UNAVAILABLE database_unavailable (or, once Core exited on a lost
// lease, the transport's UNAVAILABLE without an ErrorInfo); the flood's
// bad hellos only with UNAUTHENTICATED runtime_credential_rejected and
// its unauthenticated admin requests only with UNAUTHENTICATED
// unauthenticated; on a full data root only with FAILED_PRECONDITION
// no_ready_node_with_capacity. Any other refusal is a violation named
// refusal.
//
// Issue 12's scenarios check, besides I1-I3, what Core reports and keeps
// (their violations are named placement, observation and retention):
// TestRetiredNodeAgentKilledDuringDeletion retires a node holding
// Sessions and SIGKILLs its agent during their deletion (every allocation
// ends RELEASED, nothing is placed on the retired node, RemoveNode then
// succeeds); TestExternalContainerRemoval removes a running Session's
// container through the Engine API (compute_available false with
// compute_missing before a generous deadline, the time recorded as the
// scenario's recovery at Core's default intervals; no recreate and the
// volumes kept until deletion, polled over one full observation period
// after the report); TestEngineRestartUnderRunningSessions restarts a
// private engine under running Sessions (compute_stopped, never available
// while the container is stopped for longer than one observation period
// after the engine is back, polled until every Session reports and one
// observation period more; volumes and workspace kept).
//
// Issue 16's scenarios (suspend_test.go) suspend Sessions that ran a Turn
// and wake them with Turns, with berth-core SIGKILLed during the quiesce,
// the capture (on the engine's pause) or the restore (on the restored
// incarnation's create), the node agent SIGKILLed during the capture or
// the restore, the Runtimes' path black-holed during the wake, or the
// restored Runtime killed while parked. I1 then also requires every
// incarnation and snapshot name of an allocation to be created at most
// once (nothing captured or restored twice); I4's workspace witness reads
// each allocation's current workspace (its running incarnation, or the
// snapshot of a suspended one), so a completed Turn's line must survive
// the suspension: the Turns run before the fault must complete (exit 0,
// exact output; requireCompleted), so that check always has a line to
// find, and every completed Turn's line must be found; every Session
// runs a Turn after the repair (waking it), and cleanup leaves nothing
// (I2). With the restored Runtime
// killed while parked, the waking Turn fails at its queue deadline with
// runtime_not_ready and the Session reports compute_available false with
// compute_stopped (its incarnation on the engine, not running).
//
// TestAgentKilledDuringRunCommand drives RunCommand through Core's node
// proxy to a standalone node agent (Core itself never calls RunCommand:
// Turns go through the Runtime gateway), and TestTurnsAcrossFaults kills
// the node agent while Runtimes are connected.
//
// Issue 26's TestNodeBackOnAnotherBackend (backend_test.go) runs two
// private engines at once (startDockerdSlot: each slot its own namespace,
// lock and bridge) and restarts a node agent holding running Sessions on
// engine A against engine B: nothing may reach B (no tombstone), a
// Session deleted meanwhile stays CLEANING_UP with its container on A,
// the running one reports compute_reason backend_fingerprint_mismatch, and
// back on A the deletion completes. It then walks the explicit abandon of
// a node that moved for good (RemoveNode refusals, the abandonment and its
// durable record, A's containers untouched until the operator removes
// them).
//
// Rules: real processes, the real engine and a real PostgreSQL (a test's
// own database on the shared server; the PostgreSQL restart, connection
// and clock scenarios run their own server in a temporary folder so
// parallel tests are not disturbed); every scenario logs its seed (CHAOS_SEED replays one) and
// timings; timings are reported, never asserted tightly; CHAOS_LOGS=dir
// keeps a failed scenario's process logs there; each scenario runs
// CHAOS_RUNS times (default 1: the shortened form `make test` runs). The
// soak workload (TestSoak) runs for CHAOS_SOAK_DURATION (`make soak`), or
// soakShort (2 minutes) when it is unset, so `make test` runs it too; it
// fails on a refusal the cluster's state at that moment does not explain
// (explainRefusal): only FAILED_PRECONDITION no_ready_node_with_capacity
// is ever explained, and only by the admin API's capacity read just
// before or just after the call showing a node not taking placement or
// every node full; a capacity that cannot be read after the call explains
// nothing, and no time since a fault's repair is an excuse.
//
// Every observer is shown able to fail (selftest_test.go and
// TestInvariantChecksDetectViolations): a deliberately broken fixture in
// a real cluster, judged with cluster.captured collecting the violations,
// must be reported, and the same observer on the unbroken cluster must
// report nothing. I1-I3: a Create replayed after cleanup, an unlabelled
// volume under a derived name, a removed foreign volume. The Turn
// witness: a completed Turn's command run a second time in its sandbox
// through an Engine API exec (two host-side reports, two workspace
// lines). I6: a Session ACTIVE in Berth whose container was stopped
// through the Engine API (in a cluster without the gateway, so only the
// engine tells), and one placed on a SIGSTOPped node agent, left
// provisioning past a short deadline. The refusal check: a real capacity
// refusal judged by a state with room, and with ListNodes failing (Core
// stopped), and an UNAVAILABLE. The engine leak check (checkEngineLeaks):
// containers and volumes planted after cleanup under the installation's
// label and under an allocation's derived names without labels, and a
// tombstone holding no allocation's name. Under
// `go test -race` (make chaos-race) the harness builds berth-core and
// berth-nodeagent with -race too and fails on their race reports.
// Every captured log of the suite is scanned for the admin token,
// enrollment tokens, device credentials and private key PEM markers; in a
// cluster that serves the Runtime gateway each Runtime container's device
// credential is read from its bootstrap file as it starts (the ones
// Runtimes present to Core), and a scenario whose Runtimes started with
// none read, or a read that failed, is a violation named secrets.
// Code here is test-only: the package has no non-test code but this file.
package chaos
