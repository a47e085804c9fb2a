// Package deployment is the logic of the deployment: the initial selection
// of the sandbox provider, its configuration and the sandbox
// specification, committed as immutable generations. Service works over
// Core's store and the provider registry and knows nothing of gRPC;
// core/deploymentadmin is its thin berth.admin.v1.DeploymentService
// adapter.
//
// Rules:
//   - A candidate goes through the registry only (providers.Registry
//     Lookup and Normalize, the shared Specification bounds and the
//     registration's validators); there is no provider-specific code here.
//     Preview and Commit share that preparation, and Commit never trusts a
//     preview: it prepares and validates again. Every candidate is
//     prepared and validated before any database write, so a rejected one
//     writes nothing.
//   - Commit is fenced by the expected generation: it is refused
//     (deployment_generation_moved) unless the expected generation is
//     still current when the commit locks the deployment. A candidate
//     equal to the current deployment creates no generation.
//   - Commit creates only the first generation. After it, a candidate with
//     another selection is refused (deployment_committed: replace it) and
//     one that differs only by its credential too
//     (deployment_credential_replacement_unsupported: replacing a key
//     must verify every retained generation first, not built).
//   - Replace (replace.go) commits another selection as the next
//     generation. The parts of the candidate a mask (Fields) leaves out are
//     inherited from the current generation: the configuration through the
//     adapter (providers.Registry.ResolveChange of the current one, with
//     its credential), the specification field by field; a candidate of
//     another provider kind inherits no configuration. It is prepared and
//     validated before any write, fenced by the expected generation (a
//     retry whose replacement committed returns it), and committed in one
//     transaction (store.ReplaceGeneration) that holds the deployment row:
//     admissions (CreateSession) hold it shared, so the replacement waits
//     for those in flight and pauses the others until it commits, and an
//     admission prepared for the replaced generation is refused in its
//     own transaction (store.ErrGenerationMoved; core/sessions prepares it
//     again). That row lock is the deployment mutation gate: nodes keep
//     serving the generations their allocations hold (core/nodes
//     publishes them), so a replacement of the same provider kind drains
//     no call of the old generation.
//   - For another provider kind the same transaction retires every
//     enabled node and revokes every unused enrollment token; nodes of the
//     new kind are enrolled afterwards. Those retirements drain like
//     RetireNode: the replacement reads the enabled nodes and commits
//     through the lifecycle drain gate (GateRetirement; Core passes
//     lifecycle.Coordinator.Gate), which drains their workers between
//     operations within the guide's five-second bound, outside any
//     transaction, and commits while none of them runs; new workers then
//     go on with what the nodes hold. Past the bound nothing is cancelled
//     or committed: the replacement is refused (ErrReplaceUndrained,
//     reason owner_failure), Core closes admission (the owner failure),
//     and the drain stays a barrier for retries until Core restarts. The
//     commit retires exactly the nodes drained: a node enabled since they
//     were read refuses it (store.ErrNodesMoved, deployment_nodes_moved;
//     nothing is committed, and a retry drains it too). Admission is
//     paused only while the commit holds the deployment row, not during
//     the drain: a Session admitted meanwhile is placed for the old
//     generation on a node the commit then retires, like any Session
//     already there (decided here; the guide's pause of manager admission
//     is the row lock).
//   - After the commit OnCommit tells the nodes at once; nothing after
//     the commit can fail.
//   - The suspension policy is resolved before validation, alike for
//     Preview, Commit and Replace (suspensionOf): a candidate's own policy;
//     the explicit choice of none (Candidate.SuspensionOff); or, with
//     neither, the provider's registered defaults
//     (providers.Registration.Suspension; none for a provider without
//     checkpoint support). A preview therefore shows the policy a commit
//     stores, and a candidate that leaves the policy out differs from a
//     deployment committed with suspension off. A replacement that does
//     not set the suspension part inherits the current policy; one that
//     sets it resolves it like a first commit, for the replacement's kind.
//     Generations stored before this rule keep what they stored (no policy
//     is no suspension).
//   - Existing allocations keep their generation: a retained allocation
//     is never repointed; GetDeployment reports the retained generations
//     and, per node, the generations it serves (ObserveNodes), with the
//     serving pin (store.PromoteServingPin).
//   - The credential is write-only. Its bytes (the adapter's
//     EncodedConfiguration.Secret) are sealed with the master key and
//     additional data binding the installation and the new generation
//     number (secrets.DeploymentCredential) before they reach the store; nothing returns
//     them, and Candidate redacts itself when printed. Errors name fields,
//     never values.
//   - Invalid candidates are errdefs.ErrInvalid naming the logic's field
//     ("provider.kind", the registry's "configuration.public.*" and
//     "configuration.credential.*", the specification's "resources.*",
//     "specification.*", "suspension.*"); the adapter maps them to request
//     paths. A value out of the shared bounds (sandbox.Specification)
//     says the bounds in its reason.
//   - The provider switch (Disable, Enable) is durable state of the
//     deployment row, written only here. While it is disabled the store
//     refuses new hosted admission (CreateSession, reason
//     provider_disabled) and every new Create (ClaimCreate), so pending
//     allocations wait; it never blocks deletion, cleanup, Turn
//     cancellation, Turn results or reads. Enable is the way back.
//   - Out of scope here: selection discovery, credential verification and
//     replacement, and resets.
package deployment
