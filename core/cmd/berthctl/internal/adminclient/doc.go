// Package adminclient is how berthctl reaches Core's admin API as the
// operator: where the address and the token file come from, the admin
// token as a secret, the connection, and errors in their fixed form.
//
// Rules:
//   - The admin token is read from a file and lives only in a Token, whose
//     String, Format and LogValue print "[redacted]": no printer, log line
//     or error shows it, and it never travels in argv. The config file
//     keeps the token file's path, never the token.
//   - Settings resolve in one order: a command-line flag, then the
//     environment (BERTH_ADMIN_ADDRESS, BERTH_ADMIN_TOKEN_FILE), then the
//     config file that `berthctl login` wrote ($BERTHCTL_CONFIG, or
//     berth/berthctl.json in the user's config directory).
//   - The admin API is plaintext gRPC that Core serves on loopback only
//     (berth-core refuses another admin address), so Dial refuses any other
//     address before the token could leave the host; a remote Core is
//     reached through a tunnel to a local port.
//   - Every error a command prints is "reason: message": the fixed reason
//     of the admin API's google.rpc.ErrorInfo (domain
//     adminv1.ErrorDomain) and the status message, which says what to do;
//     berthctl's own errors (Error) take the same form.
package adminclient
