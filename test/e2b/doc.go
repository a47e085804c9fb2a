// Package e2b holds the black-box tests of an E2B deployment: the real
// berth-core, berthctl and berth-runtime built from this tree, the test
// services' PostgreSQL (and, for the change of kind, the test Docker
// engine with a real berth-nodeagent), and the E2B adapter's loopback
// fixture (sandbox/e2b/e2btest) served by the test process as E2B's API
// and envd.
//
// Decision: a fixture sandbox runs the real berth-runtime as a local
// process in private namespaces (sandboxRunner), not as a container of
// the test engine. The Runtime's /workspace and /home/runtime are fixed
// distribution paths, so each sandbox gets its own root: `unshare --mount
// --pid --fork --kill-child` runs a shell that bind-mounts the host's /usr
// and /etc (read as they are), a tmpfs /usr/local/bin holding only
// berth-runtime at runtimebootstrap.BinaryPath, the sandbox's own
// directories at /home/runtime and /workspace, a fresh /proc, /dev and a
// tmpfs /tmp into a directory of the sandbox, and chroots there. Nothing of
// the host is written (the mounts live only in the private mount
// namespace) and the Runtime is PID 1 of its own PID namespace, as in a
// real sandbox: killing the sandbox kills every process of it, escaped
// Turn processes included, and the test checks that in the OS process
// table (by the sandbox's mount namespace), not in the fixture's report.
// The network is the host's, so the Runtime dials Core's gateway on a
// loopback or bridge address. A container would bring the runtime image's
// own filesystem but needs envd's Start, stdin and signals mapped onto
// exec and a second engine client in the fixture; the namespaces keep the
// fixture's own process model (the one its contract tests prove) and need
// only root and util-linux, which CI has (the microsandbox tests use
// `unshare --mount` too).
//
// What only the fixture proves here: E2B's API as docs/e2b-receipts.md
// records it, not the live service (make check-e2b-provider runs the
// opt-in live acceptance with E2B_API_KEY).
//
// Rules:
//   - Tests talk to the processes as an operator or a peer would: the
//     admin API and berthctl (deployment commit/replace with the E2B
//     credential on stdin, turn run). Nothing imports Core's or the
//     adapter's packages; the fixture (e2btest) is the one exception, as
//     test/nodeproto imports dockertest.
//   - The E2B API key must appear in no log (Core's, every Runtime's,
//     berthctl's output) and in no argv the fixture ran.
//   - A test that needs root, unshare, the database or the Docker engine
//     fails under CI=true when it is missing, and is skipped otherwise.
package e2b
