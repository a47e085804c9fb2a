// Package microsandbox holds the black-box tests of a node agent configured
// for the microsandbox provider: the real berth-core, berth-nodeagent and
// berthctl built from this tree, the test services' PostgreSQL, and the
// real pinned msb that scripts/test-services installs (BERTH_TEST_MSB).
//
// Rules:
//   - Tests talk to the processes only as an operator would: the admin
//     API, berthctl, enrollment, the node agent's configuration file.
//     Nothing imports Core's, the node agent's or the adapter's packages:
//     the diagnostic codes are the operator's contract and are written out.
//   - No microVM boots on the CI machines (no hardware virtualization), so
//     these tests prove readiness reporting with the real msb; the native
//     lifecycle is the opt-in make check-microsandbox-provider.
//   - A test that needs msb or the database fails under CI=true when it is
//     missing, and is skipped otherwise.
package microsandbox
