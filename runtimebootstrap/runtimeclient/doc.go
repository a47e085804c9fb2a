// Package runtimeclient is berth-runtime's connection to Core: it holds one
// berth.runtime.v1 RuntimeGatewayService.Connect stream at a time, runs the
// Turns Core delivers on it with turnexec, and reconnects with jittered
// exponential backoff when the stream ends.
//
// Core's URL comes from the bootstrap file. Its scheme picks the transport
// (http: plaintext HTTP/2, https: TLS verified against the system roots) and
// its host and port (default 80 or 443) the address; the URL's path is
// ignored, because gRPC routes by service and method name, not by URL path.
//
// Core ends the stream with a google.rpc.ErrorInfo in runtimev1.ErrorDomain.
// runtime_credential_rejected, runtime_revoked and protocol_mismatch stop the
// client for good (a *StopError, errors.Is ErrStopped): retrying cannot
// succeed. Every other end (runtime_not_admitted, invalid_message, transport
// errors) is retried.
//
// Rules: the credential leaves the bootstrap File only in Hello. Log lines
// are fixed messages with identifiers, codes and counts as attributes; they
// never carry the credential, a Turn's env values, stdin or output, or
// error text from the network. All sends on a stream go through one mutex
// (a gRPC stream is not safe for concurrent Send).
package runtimeclient
