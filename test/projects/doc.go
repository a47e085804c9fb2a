// Package projects holds the black-box tests of tenants and projects
// (issue 31): real berth-core and berth-nodeagent processes built from
// this tree (test/internal/stack) over the test services' PostgreSQL and
// Docker Engine.
//
// Rules:
//   - Tests talk to the processes only as an operator or a client would:
//     the admin API and the engine's API. Nothing imports Core's or the
//     node agent's packages.
//   - Every outcome is read where it lives (the admin API, the engine),
//     never only from a process's report, and the engine is read at the
//     suite's end: anything left of an installation the tests created
//     fails it.
package projects
