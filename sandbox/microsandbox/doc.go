// Package microsandbox is the microsandbox Sandbox Provider: the node
// adapter that runs each Runtime in its own libkrun microVM (its own
// kernel, from the pinned OCI Runtime image) by driving the pinned `msb`
// command-line tool of microsandbox on the node.
//
// Decision: the adapter drives `msb` in process, one child process per
// native call (msb.go), rather than through a separate helper with its own
// protocol. `msb` is already a versioned process boundary whose exact
// version the adapter checks (PinnedVersion), every call is one argv with
// a fixed environment, and the adapter waits for each child to exit, even
// after its caller gave up, before it answers: that wait is the call fence
// (a native call of ours is never still running behind a later one).
// A helper would add a second protocol and process for nothing msb lacks.
//
// Rules:
//   - Every sandbox is named from the installation and the exact
//     Reference (Name) and carries the io.berth.* ownership labels; every
//     read, mutation and cleanup checks all of them, and a mismatch
//     touches nothing.
//   - msb runs with a fixed environment (MSB_HOME from the node
//     configuration, a fixed PATH); the node agent's environment never
//     reaches it. No secret is ever in argv: the Runtime bootstrap file is
//     copied from a private host file.
//   - Errors are errdefs classes with fixed text; msb's output, names and
//     paths never cross the adapter.
//   - Building runs no msb and checks nothing (the probe does, in the
//     guide's order, so a node that cannot boot a microVM is served and
//     says why); it creates only msb's home and, once, its random backend
//     id (BackendIDFile), the backend fingerprint: a wiped home is a new
//     backend even at the same path.
package microsandbox
