// Package refnative is a small native compute service spoken over HTTP, the
// native side of the reference adapter (internal/refadapter) that proves the
// shared contract suite. It models labelled resources with a bootstrap file,
// a start step and a command endpoint, records every call it receives and
// injects native-side faults on request.
//
// Rules:
//   - It exists for tests only: it is the fixture at the adapter's real
//     HTTP boundary, never a stand-in for a SandboxProvider.
//   - It records every call, so a test asserts what reached the native
//     side (an unsupported operation reaches nothing).
//   - It imports nothing of Berth: the native side knows no contract.
package refnative
