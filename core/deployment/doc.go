// Package deployment is the logic of the deployment: the selection of the
// sandbox provider, its configuration and the sandbox specification,
// committed as immutable generations. Service works over Core's store and
// the provider registry and knows nothing of gRPC; core/deploymentadmin is
// its thin berth.admin.v1.DeploymentService adapter. docs/deployment.md
// states every rule in full, with its reasons.
//
// Rules:
//   - A candidate goes through the registry only (no provider-specific
//     code here), and is prepared and validated before any database
//     write; Commit never trusts a preview. The suspension policy is
//     resolved first, alike for Preview, Commit and Replace.
//   - Commit and Replace are fenced by the expected generation
//     (deployment_generation_moved); an unchanged candidate creates no
//     generation. Commit creates one only when none is current (the
//     first, or the first after a deployment reset, above its empty
//     generation); else deployment_committed.
//   - Replace inherits what its mask leaves out and commits in one
//     transaction holding the deployment row, the mutation gate:
//     admissions in flight finish, later ones wait. Another provider kind
//     retires the enabled nodes through the lifecycle drain gate (five
//     seconds, then owner_failure; nothing cancelled).
//   - A candidate of a direct registration (its generic Mode) is built
//     and probed before any write (Options.Direct, core/direct.Set) and
//     refused deployment_candidate_not_ready when it cannot be; its
//     adapter is published after the commit.
//   - Existing allocations keep their generation; nothing after the
//     commit can fail.
//   - A key replacement (same kind, another credential) is refused for a
//     node provider; a direct provider's runs through Options.Direct's
//     Rekey inside the direct lane's drain gate, which verifies the new
//     key against every retained generation before the one commit that
//     points them at it (deployment_credential_sources).
//   - The credential is write-only: sealed (secrets.DeploymentCredential)
//     before it reaches the store, never returned, redacted when printed.
//     Errors name fields, never values.
//   - The current-generation pointer has one other writer: a deployment
//     reset's final transaction (core/reset, store.FinalizeReset) clears
//     it and sets the generation floor, under the same row lock. It is
//     not a change of selection but the end of every allocation, so it
//     lives with the reset; while a reset runs, every write here is
//     refused (deployment_resetting).
//   - The provider switch (Disable, Enable) is written only here; while
//     disabled, new admission and new Creates are refused
//     (provider_disabled), never deletion, cleanup, Turns or reads.
package deployment
