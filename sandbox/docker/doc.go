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
//   - Only Kill mutates to settle a creation: GetInfo and Renew only read.
//   - Before it asks the engine for ref's volumes (Create, or Kill's
//     tombstone), the adapter records ref's names in the node's state
//     directory (intents.go): a full data root makes the engine keep a
//     volume without its labels, and only the record proves such a volume
//     ref's. Without the record Create sends nothing.
//   - A foreign resource under one of ref's names is never touched. Create
//     that finds one refuses before any mutation with ErrOwnership and its
//     own absence receipt (Core sends one Create per Reference, and this
//     one made nothing). When a foreign container holds ref's name and no
//     owned volume of the first incarnation exists, Kill removes ref's
//     later incarnations and snapshots (a suspension may have removed the
//     first incarnation before the name was taken) and touches nothing
//     else; with owned first-incarnation volumes beside a foreign
//     resource it returns ErrOwnership before any change. It never places
//     a tombstone over a foreign name.
//
// The design behind the creation-absence receipt (tombstone.go), the
// filesystem checkpoints (checkpoint.go) and the tombstones' retention
// (engine.go) is docs/docker-receipts.md, with why each is sound. Fork's
// Capture, which keeps its source and copies by a helper container
// (capture.go), and CreateSeeded, which seeds a child by another
// (seed.go; Kill removes a child's seeder first), are in
// docs/docker-adapter.md.
package docker
