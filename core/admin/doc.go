// Package admin is berth-core's admin API server (berth.admin.v1): the
// gRPC server, its bearer-token authentication, its deadline policy, the
// one mapping from errdefs classes to gRPC status, and the request
// validation helpers the service implementations share.
//
// Rules:
//   - Handlers return errdefs classes (errdefs.Invalid for a named field);
//     the server converts every handler error with ToStatus, once, so no
//     native text, resource identity or credential reaches a client. An
//     error of no known class is INTERNAL with a fixed message.
//   - Every call except the standard health service and server reflection
//     needs "authorization: Bearer <token>", the admin token or a project
//     key (auth.go says why those two are open). Core stores and
//     configures only each token's SHA-256 (TokenDigest, the project key
//     digests); no token is ever logged, put in an error or passed on a
//     command line.
//   - Who a call is (Principal) is decided here and nowhere else: the
//     administrator (every project) or a project key (its project only,
//     keyMethods only; PERMISSION_DENIED project_key_method_denied for any
//     other method, from the method name alone). A project key is checked
//     twice: from memory in the tap (KeyAuthenticator.Check, no I/O), then
//     by the database before the handler (Verify, on the database clock,
//     cached projects.VerifyCache), and again every VerifyCache while its
//     stream runs. Adapters pass admin.ScopeFrom(ctx) to the logic.
//   - The token is checked from a call's headers (a tap handle), before
//     grpc-go reads its body; header lists, messages and message nesting
//     are bounded (limits.go), so an unauthenticated caller costs Core
//     one bounded header block. A body that does not decode is
//     INVALID_ARGUMENT naming "request" (decode.go), never grpc-go's text.
//   - Only the adapters in Options.Services are registered (each calls
//     Register; core/README.md, "Adapter template"): the server never
//     answers a whole service with UNIMPLEMENTED stubs.
//   - Every list method pages through Paginate (a keyset pager: page_size
//     rules, signed page tokens, one look-ahead row); a list implementation
//     gives only its query and its cursor encoding.
package admin
