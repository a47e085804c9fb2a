// Command provider-artifacts writes (-write) or checks the distribution
// projection of the provider registration table: every file each adapter
// needs distributed (providers.ArtifactCatalog; a direct adapter's are
// what the operator builds its template from, E2B's deploy/e2b), at
// deploy/projections/provider-artifacts.json.
//
// Rules:
//   - The file is generated, never edited: make generate runs it with
//     -write, make verify-generated runs it without and fails when the
//     committed file is stale.
//   - It reads only the registration table (sandbox/providers) and leaves
//     the work to core/internal/projection, so both projection commands
//     write and check the same way; it opens no database and no network.
package main
