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
// # Creation-absence receipt (tombstone.go)
//
// A Create whose outcome is unknown (its answer lost, the engine or the
// node agent gone mid-call) settles only on evidence (the guide's
// "Identity and resource ownership"): a started container, or an explicit
// absence receipt. ErrNotFound is never one, because a request of the
// original attempt may still be on its way to the engine. The adapter
// makes the receipt itself:
//
//   - Kill that finds no container under ref's name and no later
//     incarnation or snapshot of ref (after the ownership checks of the
//     name and both volume names, and after removing the owned volumes it
//     found) creates ref's tombstone: a container under
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
//   - Kill that finds a later incarnation or a snapshot of ref (checkpoint
//     support: only a settled, running first incarnation is ever
//     captured, so its Create is long over) places no tombstone: a
//     suspended or restored Session's deletion leaves nothing behind.
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
// # Checkpoints (checkpoint.go)
//
// Checkpoints are filesystem checkpoints: no process memory is captured
// (CRIU does not work on these hosts), so a restored Runtime starts anew
// from its captured home and environment volumes and authenticates again
// with the fresh bootstrap file Resume writes.
//
//   - Incarnations: generation 1 is Create's container (Name(ref)); each
//     later one is its own container Name(ref)+"-g<n>" with its own two
//     volumes (the container name plus "-home" and "-environment"). Every
//     container and volume of an incarnation carries the ownership labels
//     and io.berth.compute-generation. GetCompute, ResumeCompute,
//     KillCompute and RunCommandCompute act only on the container under
//     the incarnation's name with those labels and, once Core knows it,
//     its exact id; another container under the name is another
//     incarnation, and KillCompute then touches nothing.
//   - Suspend(operation) pauses the source (the cgroup freezer), creates a
//     never-started capture container mounting the snapshot's two new
//     volumes (SnapshotName(ref, operation) plus the suffixes), copies the
//     source's /home and /environment into them through the engine's
//     archive endpoints (contents, modes, owners, times, links), then
//     creates the snapshot's holder: a never-started container under the
//     snapshot's name whose labels carry the operation, the source
//     generation and the SHA-256 of the copied archives. The holder's
//     existence is the capture's completion: its labels are written
//     atomically with it, and it pins the snapshot's volumes. The capture
//     container, the source container and the source's volumes are then
//     removed. The identity returned (and later read back from the holder)
//     is the snapshot's name and "docker-volumes;source-generation=<n>;
//     digest=sha256:<hex>".
//   - The same operation again finds the holder and only finishes the
//     removals: it captures once. A capture container without a holder is
//     an attempt of unknown outcome, which Suspend never copies over
//     (ErrComputeUnconfirmed); ObserveOnly only reads: the snapshot, or
//     ErrNotFound when the operation has no holder (an incomplete attempt,
//     or nothing). That answer is read from the engine, after the node
//     agent let the original call end (one operation per allocation at a
//     time), and is the one on which Core thaws the source; a read that
//     failed is ErrObservationUnavailable, and across the node protocol a
//     lost answer is an unknown outcome: neither is an answer. (The
//     engine may still carry out a holder create it received before the
//     original call ended; such a late snapshot carries the allocation's
//     labels and Kill removes it.)
//   - ResumeCompute unpauses the same paused container after an aborted
//     suspend, leaves a running one as it is, and refuses a stopped one
//     (ErrRuntimeNotRunning, a code the node protocol carries): it never
//     starts a container.
//   - Resume checks the holder and that the identity is the one it
//     records, refuses an existing target, creates the target's volumes
//     and container with Create's settings, copies the snapshot in,
//     writes the fresh bootstrap file over the captured one and starts the
//     Runtime; it returns the running incarnation with its id. The
//     snapshot stays until DeleteSnapshot, which removes exactly its
//     holder, a left-over capture container and its two volumes.
//   - A restore target's absence receipt: KillCompute of an incarnation
//     of generation 2 or more whose native id Core never learned, when
//     nothing holds its name, claims the name with a tombstone exactly as
//     Kill does for a Create (same container settings, its group's two
//     volumes mounted, the incarnation's labels plus the tombstone's and
//     the engine's), after removing the group's owned volumes; none is
//     placed while a Resume into that target runs in this process.
//     GetCompute and an observe-only Resume of the target then return
//     State absent with AbsenceReceipt; a Resume into it is refused
//     (ErrExists). The soundness argument is the Create's below: Resume's
//     mutations are volume creates, a container create under the target's
//     name, and then copies and a start by the id that create returned.
//   - Kill removes every incarnation and snapshot of ref besides the first
//     incarnation (listed by ref's allocation and installation labels,
//     each checked for all ownership labels), except restore targets'
//     tombstones, which stay for Housekeep like the first's; then it
//     settles the first incarnation as before, tombstone included.
//   - Every snapshot and incarnation volume group is recorded before the
//     engine is asked for it (intents.go), as Create's is.
//
// # Retention (tombstone.go, engine.go)
//
// A tombstone is needed only while a request of the original Create could
// still reach the engine. Two rules keep that set small:
//
//   - Kill places none when Core says the creation is settled
//     (sandbox.KillRequest.CreateSettled: Core saw the started container
//     or holds a receipt). Only an unknown Create needs one, so deleting a
//     Session whose container was removed from outside leaves nothing.
//   - Housekeep (the node agent calls it beside the probe, on every health
//     report) removes a tombstone (a Create's or a restore target's), with
//     its two volumes, once the engine process that was listening when it
//     was placed has exited.
//
// Why that exit proves that no request of the original attempt can reach
// the engine any more:
//
//  1. The attempt's requests are sent by one node agent process, over
//     connections it opens to the node's socket. The node agent holds its
//     state directory's lock for its life, so the process that made the
//     attempt is either this one or has exited before this one started,
//     and a process that has exited sends nothing more.
//  2. Kill places no tombstone while a Create of the same Reference runs
//     in this process (the agent serializes an allocation's calls anyway),
//     and reads the engine identity before it creates the tombstone. So
//     when the tombstone is placed the attempt has ended, in this process
//     or with an earlier one, and every request it ever sent went to the
//     engine listening then, whose identity the tombstone records
//     (io.berth.tombstone-engine: the listener's pid, from the socket's
//     peer credentials, and its start time from /proc), or to an earlier
//     engine of the same socket, which exited before that one started.
//  3. An engine that created its own listener takes every request it
//     received, and every connection still queued on the listener, with
//     it when it exits. So once the recorded process has exited, every
//     request of the attempt has been carried out or is gone.
//
// The identity is recorded only when the peer is a process named dockerd
// in this PID namespace. A listener created by systemd (socket
// activation: pid 1), a proxy, another PID namespace (pid 0) or an
// unreadable /proc make it "unknown", because such a listener outlives the
// engine and hands its queued connections to the next one; and nothing is
// judged gone unless the engine listening now is itself visible in /proc
// (hidepid or ProtectProc would make a live engine look gone). Those
// tombstones, and the ones placed before this rule (no identity), stay
// until an operator removes them (label io.berth.tombstone=1), which is
// the operator's decision that no request of that allocation's Create can
// still reach the engine. Housekeep counts the tombstones it still holds;
// the node agent reports the count (berth_nodeagent_creation_receipts_held
// and GetNode's capacity.creation_receipts_held).
//
// A tombstone's removal never misleads Core: Core releases an allocation
// only after recording the receipt, and a Core that still holds it finds
// no receipt, kills again and gets a new tombstone that records the
// engine listening now.
package docker
