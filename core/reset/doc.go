// Package reset is the deployment reset (the guide's "Reset and
// archive"): Service starts and reads resets for
// berth.admin.v1.DeploymentService (core/deploymentadmin is its adapter),
// and Runner advances the active one on the owner. docs/reset.md states
// the procedure for operators.
//
// Rules:
//   - A reset is durable state (store.Reset), advanced by the owner's one
//     Runner outside the lifecycle coordinator's counted work, so a drain
//     never waits for it. Every transition is a transaction holding the
//     deployment row's lock (the mutation gate) or, for an archive, the
//     Session's lock first and then the reset's row: never a Session lock
//     after the deployment lock.
//   - While a reset is active, admission (new Sessions, Creates, restores)
//     and deployment changes are refused deployment_resetting; deletion,
//     archive, cleanup, Turns of live Sessions and reads are not.
//   - The archive is keyset-paged (store.ResetPageSize Sessions) and bound
//     to the reset's request time; each Session is archived in its own
//     transaction with the cursor, under the requester's provenance with
//     the reset as parent (store.Reset.Provenance), the project scope
//     read from the Session row.
//   - Held resources come from one snapshot (store.ListHeld), partitioned
//     by the holding node's presence. The Runner writes no allocation
//     (its Store has no such method, and a test keeps it so): an offline
//     node's resources stay held until its agent returns and its worker
//     confirms cleanup.
//   - At zero held the lifecycle lanes drain (Config.Drain, outside any
//     transaction), one transaction rechecks zero under the deployment
//     lock and clears the deployment, then the empty provider is
//     published (events.Generation) with nothing left that can fail. If
//     the drain or the transaction fails, the committed provider is
//     restored (Config.Restore, bounded by RestoreTimeout, detached from
//     the pass); if that fails, admission closes and Run returns
//     ErrOwnerStop, which stops Core: the next owner resumes the reset
//     from its durable phase.
//   - The absolute deadline (database clock) ends an unfinished reset
//     failed (reset_deadline_passed): the fence lifts, the committed
//     provider stays, archived Sessions stay archived.
package reset
