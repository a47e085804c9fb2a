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
//   - Only the first commit creates a generation. Nodes serve, and
//     allocations are bound to, the committed generation; after it, a
//     candidate with another selection (kind, configuration or
//     specification) is refused (deployment_replacement_unsupported), and
//     one that differs only by its credential too
//     (deployment_credential_replacement_unsupported): both need work
//     that is not built (the deployment mutation gate; verification of
//     the retained generations before a key is replaced). Preview still
//     reports such a candidate as a change.
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
//     paths.
//   - The provider switch (Disable, Enable) is durable state of the
//     deployment row, written only here. While it is disabled the store
//     refuses new hosted admission (CreateSession, reason
//     provider_disabled) and every new Create (ClaimCreate), so pending
//     allocations wait; it never blocks deletion, cleanup, Turn
//     cancellation, Turn results or reads. Enable is the way back.
//   - Out of scope here: replacing a committed deployment's backend (the
//     deployment mutation gate, draining, node retirement),
//     ResolveChange-based inheritance of omitted values, selection
//     discovery and credential verification.
package deployment
