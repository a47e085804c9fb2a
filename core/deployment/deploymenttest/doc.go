// Package deploymenttest gives the deployment tests (the logic's and the
// admin adapter's) a DeploymentService on a fresh database, over a
// registry of docker and a test-only direct provider that takes a
// credential.
//
// Rules:
//   - It is imported only by tests (core/deployment, core/deploymentadmin).
//   - Each New is a real migrated database (core/store/storetest) with its
//     own installation and sealing key: tests share nothing.
//   - The direct provider (DirectRegistration) exists only in the registry
//     this package builds; the production table (sandbox/providers) never
//     holds it.
//   - Candidates (DockerCandidate, DirectCandidate, DefaultSpec) are valid
//     as given, so a test changes only the field it is about.
//   - Assertions on generations read the database (Generations,
//     WantGenerations), never the service's own report.
package deploymenttest
