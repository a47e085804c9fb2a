// Package deploymentadmin is the thin gRPC adapter of
// berth.admin.v1.DeploymentService over core/deployment, for
// admin.Options.Deployment.
//
// Rules:
//   - It only converts: requests to the logic's arguments (candidate
//     objects to JSON within maxObjectBytes, durations, the
//     specification), results to responses, and the logic's field names
//     to request field paths (requestPaths). The admin server converts
//     errors once.
//   - The credential is input only: no response carries it, only
//     has_credential.
package deploymentadmin
