// Package projection runs the commands that write the registration
// table's machine-readable projections (core/cmd/specification-contract,
// core/cmd/provider-artifacts): with -write they write the file, without
// it they check that the committed file is fresh, so the same command
// generates and verifies (make generate, make verify-generated).
//
// Rules:
//   - The projection is a pure function of the registration table
//     (sandbox/providers): no clock, no host state, no network, so two
//     runs on any machine give the same bytes.
//   - A stale or missing file is a failure with a non-zero exit and a line
//     that names the command to run; it never rewrites the file unasked.
//   - It is internal to core's commands; nothing else imports it.
package projection
