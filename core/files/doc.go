// Package files is the logic of file operations: an upload into or a
// download from a Session's /workspace through its Runtime (the guide's
// "live file access"). core/fileadmin is its thin berth.admin.v1
// FileService adapter; core/gateway hands it the Runtime's side.
//
// One operation goes like this. The admin call checks the request
// lexically (filexfer's rules, the same the Runtime applies again against
// its filesystem), admits a file_operations row as pending under the
// Session's share lock (store.SubmitFileOperation: the per-Session bound,
// the wake of a suspended Session) and announces the Session on the bus.
// The Session's Runtime connection (core/gateway) claims it under the
// Turn claim's compute-phase check and sends open_transfer; the Runtime
// opens a Transfer stream, which the gateway authenticates and hands to
// the waiting admin call through the broker. The admin call then pumps
// bytes between its client and the Runtime, one message in hand each way
// (HTTP/2 flow control is the back-pressure), and records the outcome.
//
// Rules:
//   - This package is the one writer of file_operations (Writes;
//     writers_test.go fails when another package calls one).
//   - It signals an admitted operation as events.Session, the kind a
//     Session's Runtime connection already waits on for "what this
//     Session's connection dispatches changed" (core/turns publishes it for
//     Turns): no new kind, no callback.
//   - Bytes never pass through the database or sit whole in memory: an
//     upload's tar is parsed as a stream (archive/tar) and forwarded as
//     typed entries; a download's tar is written as entries arrive.
//   - The admin call and the Transfer stream live in the same process:
//     one active Core serves both (the guide has no multi-active Core). An
//     operation whose admitting Core died is failed by the next owner's
//     sweep (core_restarted), so none blocks suspension for ever.
//   - No operation is replayed. A failed upload leaves the files already
//     renamed into place (each file is atomic, the archive is not); the
//     Runtime removes its temporary files, or its journal sweep does at the
//     next preparation.
//   - Every refusal has a fixed reason (the FileService comment in
//     proto/berth/admin/v1/file.proto); a bound's refusal names the bound
//     and its configured value. Paths, file names and bytes never reach a
//     log line, an error or a span.
package files
