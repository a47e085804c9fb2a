// Command specification-contract writes (-write) or checks the installer's
// projection of the provider registration table: the shared bounds of a
// deployment specification and each provider kind's policies
// (providers.SpecificationContract), at
// deploy/projections/specification-contract.json.
//
// Rules:
//   - The file is generated, never edited: make generate runs it with
//     -write, make verify-generated runs it without and fails when the
//     committed file is stale.
//   - It reads only the registration table (sandbox/providers) and leaves
//     the work to core/internal/projection, so both projection commands
//     write and check the same way; it opens no database and no network.
package main
