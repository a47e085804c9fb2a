// Package deploymentadmin is the thin gRPC adapter of
// berth.admin.v1.DeploymentService over core/deployment, served by the
// admin server (admin.Options.Services).
//
// Rules:
//   - It only converts: requests to the logic's arguments (candidate
//     objects to JSON within maxObjectBytes, durations, the
//     specification), results to responses, and the logic's field names
//     to request field paths (requestPaths), all in convert.go; server.go
//     only forwards. The admin server converts errors once.
//   - The credential is input only: no response carries it, only
//     has_credential.
//   - A candidate's absent suspension policy is the logic's zero policy
//     (the provider's registered defaults); disabled is
//     Candidate.SuspensionOff; a present policy is complete or disabled.
//     A committed deployment always reports its policy, disabled when it
//     suspends nothing, so a reported specification sent back as a
//     candidate is the same deployment.
package deploymentadmin
