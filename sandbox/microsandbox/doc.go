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
// (a native call of ours is never still running behind a later one; the
// child dies with the node agent, Pdeathsig). A helper would add a second
// protocol and process for nothing msb lacks.
//
// Rules (the msb facts behind them: docs/microsandbox-receipts.md):
//   - Every sandbox is named from the installation and the exact
//     Reference (Name) and carries the io.berth.* ownership labels; every
//     read, mutation and cleanup checks all of them, and a mismatch
//     touches nothing. Kill removes by the four labels, never by a name.
//   - msb runs with a fixed environment (MSB_HOME from the node
//     configuration, a fixed PATH); the node agent's environment never
//     reaches it. No secret is ever in argv: the bootstrap file (0600) and
//     the CA (0644) are written to the sandbox's host home directory,
//     mounted at /home/runtime as the Runtime user; stdin goes to msb's
//     stdin.
//   - Each sandbox's host directories live under the generation's state
//     directory (microsandbox/<name>: home, environment, its workspace at
//     /workspace), so the workspace survives the microVM; Kill removes
//     them after the sandbox and confirms both gone.
//   - Create asks msb once (`run --detach`, after checking the name is
//     free), then reads the record back: image digest, CPU, memory, disk.
//     An unknown outcome is settled by the call fence: only the msb
//     process of the call inserts a record, so once it has exited, Kill's
//     list by labels is final. Create and Kill of one name serialize.
//   - Network: none or msb's public profile, plus one exact egress rule
//     for Core's host and port from the bootstrap (and DNS for a name),
//     since msb denies private ranges by default.
//   - RunCommand settles only on its completion record (the exit status
//     the wrapping /bin/sh writes last on stderr after a per-call nonce);
//     msb's own exit code cannot tell its failures from the command's.
//     It runs only in a Running sandbox: msb's exec boots a stopped one.
//   - Checkpoints are declared unsupported (ReasonNoCheckpoints): msb has
//     no pause, and `msb snapshot create` needs a stopped sandbox, so an
//     aborted Suspend could not be undone by thawing the same resident
//     microVM (ResumeCompute never cold-starts); not built until it can.
//   - Errors are errdefs classes with fixed text; msb's output, names and
//     paths never cross the adapter.
//   - Building runs no msb and checks nothing (the probe does, in the
//     guide's order, so a node that cannot boot a microVM is served and
//     says why); it creates only msb's home and, once, its random backend
//     id (BackendIDFile), the backend fingerprint: a wiped home is a new
//     backend even at the same path.
package microsandbox
