// Package runtimeclient is berth-runtime's connection to Core: it holds one
// berth.runtime.v1 RuntimeGatewayService.Connect stream at a time, runs the
// Turns Core delivers on it with turnexec, and reconnects with jittered
// exponential backoff when the stream ends.
//
// Core's URL comes from the bootstrap file. Its scheme picks the transport
// and its host and port (default 80 or 443) the address; the URL's path is
// ignored, because gRPC routes by service and method name, not by URL path.
// https is TLS verified for the URL's host against the CA certificate
// beside the bootstrap file (runtimebootstrap.CAFile, written by the
// adapter when Core's gateway certificate comes from the installation CA)
// or, without that file, the system roots. http is plaintext HTTP/2, and
// only to a loopback or private IP address (or localhost) unless
// Config.AllowInsecure says otherwise (ErrPlaintextRefused): the Hello
// carries the device credential.
//
// Core ends the stream with a google.rpc.ErrorInfo in runtimev1.ErrorDomain.
// runtime_credential_rejected, runtime_revoked and protocol_mismatch stop the
// client for good (a *StopError, errors.Is ErrStopped): retrying cannot
// succeed. Every other end (runtime_not_admitted, invalid_message, transport
// errors) is retried.
//
// Planned suspension (the proto's Quiesce): while a Turn runs a quiesce is
// answered quiesce_rejected(turn_running). Otherwise the client waits
// until the last Turn's result was sent, writes the park marker next to
// the bootstrap file (Config.BootstrapPath) durably, closes admission and
// answers quiesce_ack with the token; a marker it cannot write is
// quiesce_rejected(park_failed) with admission unchanged. Once admission
// is closed a run_turn ends the connection, and so does a quiesce whose
// token is not 1 to 128 bytes of printable ASCII; the client then
// reconnects. The quiesced state belongs to a connection: every welcome
// removes the marker and starts with admission open. Keepalives are
// answered throughout. Staying parked while the marker exists is
// cmd/berth-runtime's job, before the Client runs.
//
// File operations: prepared announces runtimev1.CapabilityFiles. An
// open_transfer opens a Transfer stream on the connection's ClientConn,
// under the connection's context, says hello with the device's identity
// and applies an upload (filexfer.Writer) or sends a download
// (filexfer.Measure, Walk) in chunks of at most MaxTransferChunk. A
// refusal is answered with its fixed reason; anything else ends the stream
// without an answer. Temporary files are removed when the stream ends;
// their directories are listed in a journal beside the bootstrap file,
// which each preparation sweeps, so a Runtime killed mid-upload or a
// sandbox restored from a capture taken mid-upload leaves none behind. A
// quiesce waits up to transferDrain (30 s) for running transfers, then
// answers quiesce_rejected(file_work_pending); once quiesced, open_transfer
// is ignored.
//
// Rules: the credential leaves the bootstrap File only in Hello and
// TransferHello. Log lines are fixed messages with identifiers, codes and
// counts as attributes; they never carry the credential, a Turn's env
// values, stdin or output, a path, a file name or a file's bytes (a
// transfer logs its id, counts and refusal reasons only), or error text
// from the network or the filesystem. All sends on a stream go through
// one mutex (a gRPC stream is not safe for concurrent Send).
package runtimeclient
