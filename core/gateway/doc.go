// Package gateway is Core's side of the Core-Runtime protocol
// (berth.runtime.v1): it authenticates each Runtime's Connect stream with
// its device id and dedicated credential, records the connection with a
// durable generation, and delivers the Session's queued Turns one at a
// time, recording their output and results.
//
// Rules:
//   - A Runtime is accepted only for the exact device, allocation and
//     Session binding, with settled creation and completed bootstrap, and
//     only while this Core holds the current owner epoch (store.AcceptRuntime).
//   - Turns go only to a connection that reported its preparation; a Turn
//     is claimed in the database before it is sent and never sent again:
//     when the connection ends first it becomes unconfirmed.
//   - Terminal cleanup (store.Termination) revokes the device: a new
//     hello is refused (runtime revoked) and no new Turn is claimed. The
//     open connection forwards the cancellation terminal cleanup requested
//     for its running Turn and keeps taking that Turn's output and result
//     for at most 20 seconds from its cancel_requested_at, then ends; a
//     result that did not arrive leaves the Turn unconfirmed, never a
//     fabricated cancelled outcome.
//   - File operations (core/files, their one writer): a prepared
//     connection that is not quiescing claims its Session's pending
//     operations when woken (events.Session) and sends open_transfer for
//     each, beside any Turn; one whose Runtime did not announce the
//     files.v1 capability fails runtime_lacks_files. The Transfer RPC
//     (transfer.go) checks the hello's device credential and that the
//     device's open connection claimed the operation, then hands the stream
//     to the admin call waiting for it; a connection's end fails the
//     operations running on it.
//   - Core sends service keepalives (between Turns and during them); a
//     Runtime that stops answering is disconnected.
//   - Errors on the wire carry only fixed reasons (runtimev1 Reason*),
//     never native text, ids or credentials; the credential is compared by
//     digest and never logged.
package gateway
