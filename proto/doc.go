// Package proto is the root of Berth's wire protocols: the buf module of
// berth/sandboxnode/v1 (Core to node agent), berth/enrollment/v1 (node
// enrollment), berth/admin/v1 (the admin API) and berth/runtime/v1 (the
// Runtime's connection to Core), with their generated Go code (committed;
// `make generate`) and, beside each, the hand-written protocol constants
// (version strings, metadata keys, ErrorInfo domains and reasons).
//
// Rules: this module imports no other Berth module; a wire-visible change
// bumps the protocol's version string (version.go) and passes `buf
// breaking` or is a new major version. The one exception is an additive
// message that a peer of the same version without it safely ignores
// (and whose absence of an answer the other side bounds): it keeps the
// version, since an exact-match bump would stop every running peer for
// good, and is recorded in the change log as an addition.
package proto
