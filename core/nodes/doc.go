// Package nodes is Core's side of the node protocol and the
// administrative lifecycle of nodes. The protocol side (Manager, Proxy)
// dials each enabled node with Core's client certificate, holds its
// Connect stream and exposes the node as a sandbox provider, so lifecycle
// code never knows whether a provider is local or remote. The
// administrative side (Registry) moves nodes between enrolled, enabled,
// retired and removed; core/nodeadmin is its thin NodeService adapter.
// Manager and Registry each declare the narrow store interface they use.
// docs/nodes.md states every rule in full, with its reasons.
//
// Rules:
//   - The Proxy checks its declaration before it sends anything; every
//     call carries protocol version, connection id, owner epoch and the
//     allocation's own generation. Errors come back once through
//     nodewire.FromError; a transport failure on a mutation is an unknown
//     outcome and nothing is ever resent. A page of reads is one
//     ObserveBatch call (Proxy.GetInfoBatch): each target answers or
//     fails on its own, and only the typed unsupported error for
//     ObserveBatch is the whole call's. An agent without the Capture RPC
//     (gRPC's own "unknown method") is Capture unsupported
//     (node_protocol_no_capture), never an unknown outcome.
//   - A node's connection costs one ClientConn and the Connect stream's
//     goroutine, which closes the ClientConn when the stream ends
//     (OpenClosing), besides its manager loop.
//   - Node state changes go through the store's compare-and-swap; a lost
//     race is read and decided again (bounded, then errdefs.ErrFenced),
//     never forced. Refusals carry fixed reasons: node_removed,
//     node_enabled, node_holds_allocations.
//   - The one exception to offline ownership is the operator's explicit
//     abandon (Registry.Abandon): a retired node, its bound backend named,
//     its agent back on another backend; one recorded transaction that
//     ends its Sessions (node_abandoned) and deletes nothing on an engine.
//   - Core publishes the generations each node must serve
//     (ServeGenerations) before its Proxy is offered, after a commit and
//     whenever the set changes; a node never serves one of its own.
//   - A node is ready only for the committed generation as committed
//     (Binding.Check), and is bound to its backend when it first serves
//     it; no call reaches a node whose backend differs from its binding
//     (backend_fingerprint_mismatch).
//   - Presence is one database predicate (node_present): a held
//     connection under the current lease and a health report less than
//     45 seconds old by the database clock.
//   - A Registry Node carries no presence, readiness or capacity; those
//     are the Manager's observations, added by the adapter.
package nodes
