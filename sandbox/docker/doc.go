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
//     one made nothing). Kill succeeds without a mutation when a foreign
//     container holds ref's name and no owned volume exists, and returns
//     ErrOwnership otherwise; it never places a tombstone over a foreign
//     name.
//
// # Creation-absence receipt (tombstone.go)
//
// A Create whose outcome is unknown (its answer lost, the engine or the
// node agent gone mid-call) settles only on evidence (the guide's
// "Identity and resource ownership"): a started container, or an explicit
// absence receipt. ErrNotFound is never one, because a request of the
// original attempt may still be on its way to the engine. The adapter
// makes the receipt itself:
//
//   - Kill that finds no container under ref's name (after the ownership
//     checks of the name and both volume names, and after removing the
//     owned volumes it found) creates ref's tombstone: a container under
//     ref's name, with every ownership label plus io.berth.tombstone=1,
//     never started (its entrypoint is a path no image has), no network,
//     no capabilities, read-only root, mounting ref's two volume names,
//     which the engine creates empty and labelled. It then confirms that
//     the tombstone holds the name and both volumes are owned. A Kill that
//     finds the tombstone succeeds without changing anything.
//   - GetInfo (and Renew) of ref whose name is held by ref's own tombstone
//     returns the receipt: State absent, CreateSettled, no native id, no
//     bootstrap. Create that finds it returns ErrExists with the same
//     receipt and touches nothing; Observe and RunCommand see no compute
//     (ErrNotFound).
//   - Kill that finds a container, started or not, removes it and the
//     volumes as before and leaves no tombstone: creation is then not
//     proved settled by anything GetInfo can read, so Core kills again
//     while creation is unsettled, and that Kill finds no container.
//
// Why the receipt is sound, that is, why the original attempt can no
// longer change any resource once the tombstone exists:
//
//  1. Create's mutations are, in this order: create the home volume,
//     create the environment volume, create the container under ref's
//     name, then copy two archives into and start the container by the id
//     that container create returned. Create never retries a step, never
//     uses another name and never removes anything, and Core sends it at
//     most once per Reference (its claimed create receipt).
//  2. The engine keeps container names unique and reserves the name in
//     container create before it creates anything else (the mounts'
//     volumes included): while the tombstone holds ref's name, the
//     original container create fails with a conflict and creates nothing.
//     It cannot have succeeded before either: the tombstone's own create
//     would then have failed on the name, and Kill would have reported an
//     unknown outcome instead of a receipt. So the original attempt never
//     gets a container id, and its copy and start steps cannot happen.
//  3. Its volume creates cannot change anything either: the tombstone
//     mounts both volume names, the engine refuses to remove a volume a
//     container uses, and it answers a create of an existing volume name
//     with that volume unchanged. The volumes are empty: only a container
//     writes into a volume, the tombstone never runs, and the volumes Kill
//     found (which may hold a copied bootstrap file) were removed before
//     the tombstone was created.
//  4. No Runtime compute exists (State absent): the tombstone runs no
//     process and cannot be started into one.
//
// The receipt is read from the tombstone itself, never inferred from
// ErrNotFound, a listing or Kill's success. Ownership is checked as for
// every resource: a container or volume under ref's names without every
// ownership label of ref (a "tombstone" of another tenant included) is
// foreign, never trusted as a receipt, and stops Kill before it changes
// anything. Create's volume mounts carry the ownership labels too, so a
// volume the engine creates again for a container create that raced a
// Kill stays owned and the next Kill removes it.
//
// Retention: the tombstone and its two empty volumes stay for as long as
// the engine keeps them. Removing the tombstone would free the name, and
// the adapter can never prove that no request of the original attempt is
// still on its way: an engine carries out a request it received after its
// client is gone, and nothing bounds when a delayed one arrives. The
// adapter cannot learn that Core released the allocation, and that would
// not prove it either. A tombstone costs one never-started container and
// two empty volumes, and is left only when Kill finds no container: after
// an unknown Create whose container never appeared or was removed by an
// earlier Kill, or when a Kill is repeated after one that removed
// everything (a retry after a partial cleanup failure, or after a lost
// record of its success). Core sends no Kill for an allocation whose
// Create was never sent. Tombstones carry the allocation's labels, so an
// operator can list them (label io.berth.tombstone=1); removing one is an
// operator's decision that no request of that allocation's Create can
// still reach the engine.
package docker
