// Package turns is the logic of Turns: validating and queueing them for a
// Session (with their environment and stdin sealed at rest), reading,
// listing and cancelling them, streaming their recorded output, and the
// sweeper that fails Turns no Runtime picked up in time, and recording what
// a Runtime reports (runtime.go). The Runtime gateway (core/gateway)
// delivers them and reports through this package; the admin API
// (core/turnadmin) exposes them.
//
// Rules:
//   - Every caller's entry (Submit, Get, List, Cancel, StreamOutput)
//     takes the call's projects.Scope and reads the Session through
//     projects.Visible first (no read for the administrator, whose write
//     finds a missing Session itself): a Session of a project the scope does not
//     see is errdefs.ErrNotFound, as a missing one is, and nothing is
//     queued, cancelled or streamed. The Runtime's entries (runtime.go)
//     are bound to their connection instead.
//   - This package is the one writer of Turn state, and publishes each
//     committed change of a Turn or a Session's queue on the bus
//     (events.Turn, events.Session) for whoever waits on them. The one
//     exception is terminal cleanup (store.Termination: Session deletion,
//     an Environment's failure or expiry, a node's abandonment): it ends
//     queued Turns with a fixed
//     code (session_deleted, environment_failed, environment_expired; an
//     overdue one runtime_not_ready) and requests cancellation of the
//     running one inside its own store transaction, so the device's
//     revocation, the Environment's end, the Turns and the cleanup
//     request commit together, and its writer publishes what it changed
//     (events.Terminated). Its Turn SQL lives in the Turn queries
//     (store/queries/turns.sql) like every other Turn write.
//   - Errors name the logic's own fields ("command.argv", "env"); the
//     adapter maps them to request paths.
//   - A Turn runs at most once: it is queued once per request id, claimed
//     once, and a Turn whose connection ends before its result becomes
//     unconfirmed, never queued again.
//   - Environment values and stdin may be secrets: they are sealed under
//     the installation key bound to the Turn id, never logged, never
//     returned, and the request digest that tells a retry from another
//     Turn is an HMAC under a derived key, not a plain hash.
//   - Lifecycle times (queue deadlines, expiry) come from the database
//     clock.
package turns
