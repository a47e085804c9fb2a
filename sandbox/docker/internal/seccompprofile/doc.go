// Package seccompprofile builds the Runtime seccomp profile that the Docker
// adapter passes to the engine (guide: "Seccomp profile"): Moby's default
// profile, taken from the Go module github.com/moby/profiles/seccomp, with
// one rule appended last that allows the syscalls a Runtime needs for its own
// nested sandbox.
//
// Rules:
//   - The profile is never written by hand. The generator
//     (berth.dev/sandbox/docker/internal/seccompgen, run by `make
//     generate`) writes deploy/runtime/seccomp.json from Build, and the
//     docker package's tests check that the committed file still equals
//     Build's output.
//   - Build is deterministic: the same module version gives the same bytes
//     and digest, which the adapter pins.
//   - It is internal to sandbox/docker and imports nothing of Berth.
package seccompprofile
