// Package microsandbox holds the black-box tests of a node agent configured
// for the microsandbox provider: the real berth-core, berth-nodeagent and
// berthctl built from this tree, the test services' PostgreSQL, and either
// the real pinned msb that scripts/test-services installs (BERTH_TEST_MSB)
// or the adapter's native-side fixture, fakemsb (msbtest).
//
// Rules:
//   - Tests talk to the processes only as an operator or a peer would:
//     the admin API, berthctl, enrollment, the node agent's configuration
//     file, and the node protocol as Core (stack.Node.Connect) for the
//     contract suite through a node.
//     Nothing imports Core's, the node agent's or the adapter's packages:
//     the diagnostic codes are the operator's contract and are written out.
//     The one exception is the adapter's fixture, msbtest (as
//     test/nodeproto imports dockertest): it plays msb, is read for the
//     native side, and carries the case table the in-process suite runs.
//   - No microVM boots on the CI machines (no hardware virtualization), so
//     the real msb proves readiness reporting only; a ready node runs on a
//     fake host (fakeHost: fakemsb, and the agent in a private mount
//     namespace whose /proc/cpuinfo has the vmx flag). The native
//     lifecycle is the opt-in make check-microsandbox-provider.
//   - A test that needs msb, the database or a private mount namespace
//     fails under CI=true when it is missing, and is skipped otherwise.
package microsandbox
