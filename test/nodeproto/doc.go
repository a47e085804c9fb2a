// Package nodeproto holds the black-box tests of the node protocol and of
// Core driving nodes: real berth-core and berth-nodeagent processes built
// from this tree (test/internal/stack), the test services' PostgreSQL and
// Docker Engine, or a dockertest engine where a test needs a fault the real
// engine cannot give.
//
// Rules:
//   - Tests talk to the processes only as an operator or a peer would: the
//     admin API, the node protocol over mutual TLS, enrollment, the engine's
//     API. Nothing imports Core's or the node agent's packages.
//   - Every check reads the outcome where it lives (the admin API, the
//     engine, the node's state directory), never only a process's report.
//   - A test that needs the services fails under CI=true when they are
//     missing, and the engine is read at the suite's end: anything left of
//     an installation the tests created fails it.
package nodeproto
