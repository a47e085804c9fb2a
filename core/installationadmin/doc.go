// Package installationadmin is the thin gRPC adapter of
// berth.admin.v1.InstallationService over core/installation, served by the
// admin server (admin.Options.Services).
//
// Rules:
//   - It only converts: the request's name (admin.ValidateName, the one
//     name "installation") and the installation to its message
//     (convert.go). The admin server converts errors once.
//   - It reads through Reader, the one method of core/installation it
//     needs, so a test serves it over a fake.
//   - It carries no secret: the CA is shown by fingerprint only.
package installationadmin
