// Package contracttest is the shared Sandbox Provider contract suite. Every
// adapter runs the same checks through its real native boundary:
//
//   - RunDeclaration: the declaration is complete and the instance
//     implements every contract interface.
//   - RunUnsupported: every method declared unsupported, called on an
//     adapter with no native client, returns the matching typed error and a
//     zero result without touching anything.
//   - RunFailures: native-side faults (transport failure, cancellation after
//     dispatch, foreign ownership, cleanup failure) injected at the adapter's
//     native boundary by a fixture; the suite asserts the error class, that
//     nothing is claimed settled, the exact Reference or none, and the exact
//     list of native calls (no replay, no fallback, no implicit cleanup).
//   - RunCheckpointFailures: for an adapter with checkpoints, the same for
//     Suspend, Resume, ResumeCompute, KillCompute and DeleteSnapshot from a
//     set-up state (running, paused, stopped, suspended); after a capture
//     or restore of unknown outcome, ObserveOnly sends no mutation and a
//     repeated Suspend never captures again; a stopped source is refused
//     by ResumeCompute without a native mutation; foreign snapshot names
//     are never touched.
//
// Rules: the suite drives real adapters against native-side fixtures (for
// example an httptest server speaking the Docker Engine API), never a fake
// SandboxProvider. It imports only sandbox packages and the standard
// library.
package contracttest
