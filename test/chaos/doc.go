// Package chaos is Berth's fault-injection suite (issue #7): it drives a
// real berth-core, several real berth-nodeagent processes, PostgreSQL and
// the Docker Engine through the admin API, injects faults, and after each
// scenario checks the invariants I1-I6 (no duplicate Create, no leak,
// foreign resources kept, every Turn ends with its exact output or a clear
// failure in time, healthy nodes keep serving, every Session a fault
// touched ends ACTIVE or FAILED with a failure code) against the engine
// and the database. docs/chaos.md is its design: every fault, each
// invariant's exact reading and bound, and every scenario.
//
// Rules:
//   - Real processes, the real engine and a real PostgreSQL (a test's own
//     database on the shared server; the PostgreSQL restart, connection
//     and clock scenarios run their own server in a temporary folder).
//   - Observers are independent of Berth's own report where one exists
//     (the engine's event log and container list, Turn side effects). An
//     observer that cannot read fails the scenario: only the engine's
//     NotFound means gone, never a failed read.
//   - Every observer is shown able to fail by a deliberately broken
//     fixture (selftest_test.go, TestInvariantChecksDetectViolations).
//   - Refusals are checked by exact gRPC code and ErrorInfo domain and
//     reason (refusal_test.go); any other refusal is a violation. The soak
//     fails on a refusal the cluster's state at that moment does not
//     explain.
//   - Every scenario logs its seed (CHAOS_SEED replays one) and timings;
//     timings are reported, never asserted tightly (I5 is a ratio with a
//     margin); CHAOS_LOGS=dir keeps a failed scenario's logs; CHAOS_RUNS
//     runs each scenario that often (default 1: make test's short form).
//   - Every captured log is scanned for the admin token, enrollment
//     tokens, device credentials and private key PEM markers.
//   - Code here is test-only: the package has no non-test code but this
//     file.
package chaos
