// Package docker is the Docker Sandbox Provider: the reference node adapter.
// It runs every Runtime with the same container settings (the guide's
// "Docker adapter"): user 1000:1000, read-only root filesystem, all
// capabilities dropped, no-new-privileges, the shipped seccomp profile,
// AppArmor unconfined, the node's network and extra hosts, CPU and memory
// from the deployment specification, 128 processes, a 128 MiB /tmp tmpfs,
// and two labelled named volumes (<name>-home at /home, <name>-environment
// at /environment, whose workspace subdirectory is also mounted at
// /workspace through a volume subpath mount).
//
// Rules:
//   - Every resource is named from the installation and the exact Reference
//     and carries the io.berth.* ownership labels; every read, mutation and
//     cleanup checks all of them, and a mismatch touches nothing.
//   - Create never reuses an existing container or retained volume, never
//     retries a step and never cleans up after itself: a failure after
//     resources exist returns the Reference (and native id) with the error
//     for owned cleanup by Kill.
//   - A transport failure or cancellation is an unknown outcome. The Docker
//     client here never reuses connections, so net/http cannot silently
//     resend a request either: every native call happens once.
//   - The node's explicit socket is used; DOCKER_HOST and the rest of the
//     process environment are ignored.
//   - Errors are errdefs classes with fixed text; Docker's messages, ids and
//     paths never cross the adapter.
package docker
