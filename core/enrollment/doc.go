// Package enrollment is Core's side of node enrollment: the enrollment
// tokens an administrator issues (Tokens) and the exchange of one such
// single-use token and a CSR for a certificate of the installation CA, for
// a node id Core assigns, that records the node (Service).
//
// Both speak domain terms (request ids as UUIDs, token ids, lifetimes,
// keyset cursors and limits) and know nothing of gRPC: core/nodeadmin is
// the thin berth.admin.v1.NodeService adapter of Tokens, and
// core/enrollmentgrpc the adapter of Service on the public listener. Each
// declares its own narrow store interface (TokenStore, Store).
//
// Rules:
//   - Core stores only a token's id and the SHA-256 of its secret. A
//     token's text is returned only by Tokens.Create; no other call, log
//     or error carries it, and TokenText redacts itself when printed.
//   - A token's lifetime is bounded (MinTokenTTL to MaxTokenTTL), and
//     lifecycle decisions (expiry, usability) are made on the database
//     clock by the store; the Go clock passed in only stamps issuance.
//   - Creation is idempotent per request id: a retry never creates a
//     second token, it gives the same unused token a new secret (the lost
//     text cannot be shown again); a retry after use or revocation is
//     refused.
//   - Every refusal of a token at enrollment has one fixed text whichever
//     check failed (ErrRejected); a node that retries with the same token
//     and the same key after a lost answer gets the same node id (a
//     certificate for the same key), never a second node; a retired or
//     removed node never enrolls again.
//   - Errors are errdefs classes: an invalid argument names its field
//     ("request_id", "ttl", "token", "csr_der", "advertise_address").
package enrollment
