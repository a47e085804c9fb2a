// Package nodeadmin serves berth.admin.v1.NodeService: enrollment tokens
// (create, list, revoke) and the administrative lifecycle of nodes (list,
// get, enable, retire, remove).
//
// Service is the logic, over Core's store and testable without gRPC;
// NewServer is the thin gRPC layer that converts requests and responses
// for admin.Options.Nodes (the admin server converts its errors once,
// with admin.ToStatus).
//
// Rules:
//   - An enrollment token's text is returned only by
//     CreateEnrollmentToken. Core stores the token's id and the SHA-256 of
//     its secret; no other call, log or error carries the text, and
//     TokenText redacts itself when printed.
//   - Lifecycle decisions (expiry, usability) are made on the database
//     clock by the store; the Go clock passed in only stamps issuance.
//   - Node state changes go through the store's compare-and-swap
//     (store.SetNodeState): a change that lost a race is read again and
//     decided again, never forced.
//   - Errors are errdefs classes: an invalid request names its field, a
//     state that refuses the operation is errdefs.ErrFailedPrecondition.
package nodeadmin
