// Package deployment serves berth.admin.v1.DeploymentService: the initial
// selection of the sandbox provider, its configuration and the sandbox
// specification, committed as immutable generations.
//
// Service is the logic, over Core's store and the provider registry and
// testable without gRPC; NewServer is the thin gRPC layer that converts
// requests and responses for admin.Options.Deployment (the admin
// server converts its errors once, with admin.ToStatus).
//
// Rules:
//   - A candidate goes through the registry only (providers.Registry
//     Lookup and Normalize, the shared Specification bounds and the
//     registration's validators); there is no provider-specific code here.
//     Preview and Commit share that preparation, and Commit never trusts a
//     preview: it prepares and validates again. Every candidate is
//     prepared and validated before any database write, so a rejected one
//     writes nothing.
//   - Commit is fenced by the expected generation: the store refuses it
//     (errdefs.ErrFailedPrecondition) unless the expected generation is
//     still current when the commit locks the deployment. A candidate
//     equal to the current deployment creates no generation.
//   - The credential is write-only. Its bytes (the adapter's
//     EncodedConfiguration.Secret) are sealed with the master key and
//     additional data binding the installation and the new generation
//     number (CredentialAD) before they reach the store; nothing returns
//     them, and Candidate redacts itself when printed. Errors name fields,
//     never values.
//   - Invalid candidates are errdefs.ErrInvalid naming the request field
//     ("candidate.provider_kind", "candidate.specification.cpu_millis",
//     "candidate.configuration", "candidate.credential", ...).
//   - Out of scope here: replacing a committed deployment's backend (the
//     deployment mutation gate, draining, node retirement),
//     ResolveChange-based inheritance of omitted values, selection
//     discovery and credential verification.
package deployment
