// Package nodes is Core's side of the node protocol and the
// administrative lifecycle of nodes.
//
// The protocol side dials a node agent with Core's client certificate,
// checks the version handshake, opens the Connect stream that is the
// node's connection (Manager keeps one per enabled node), and exposes the
// node as a sandbox provider (Proxy), so lifecycle code never knows
// whether a provider is local or remote.
//
// The administrative side (Registry) lists and reads the enrolled nodes
// and moves them between enrolled, enabled, retired and removed. It speaks
// domain terms (node ids, keyset cursors and limits) and knows nothing of
// gRPC: core/nodeadmin is its thin berth.admin.v1.NodeService adapter.
// Manager and Registry each declare the narrow store interface they use
// (Store, RegistryStore).
//
// Rules:
//   - The Proxy checks its declaration before it resolves a connection or
//     sends anything; operations the transport does not carry
//     (ObserveBatch, DiscoverSelection, VerifyCredential) are declared
//     unsupported here with reason codes.
//   - Every call carries the protocol version, connection id, owner epoch
//     and generation. Errors come back once through nodewire.FromError; a
//     transport failure or deadline on a mutation is an unknown outcome and
//     nothing is ever resent.
//   - Node state changes go through the store's compare-and-swap
//     (store.SetNodeState): a change that lost a race is read again and
//     decided again (a bounded number of times, then errdefs.ErrFenced),
//     never forced. A change to the state the node is already in writes
//     nothing.
//   - A state that refuses a change is errdefs.ErrFailedPrecondition with
//     a fixed reason and a message that says what to do: node_removed (a
//     removed node is never enabled or retired again), node_enabled
//     (retire before removing), node_holds_allocations (a node that still
//     holds an allocation, placement or cleanup is not removed: offline
//     ownership is kept).
//   - The one exception is an operator's explicit abandon
//     (Registry.Abandon; RemoveNode with abandon), for a host that really
//     moved to another engine. Decided here, as the guide is silent: it
//     is allowed only for a retired node (node_enabled), only when the
//     request names the backend the node is bound to
//     (abandon_backend_not_bound: the operator states what is abandoned)
//     and only when the node's latest presence record says its agent came
//     back on another backend (node_backend_not_mismatched: a node that
//     is merely offline keeps its ownership, as the guide requires). It
//     runs through the retirement gate, then store.Owner.AbandonNode, in
//     one transaction, ends every Environment the node holds as failed
//     (node_abandoned, by the ordinary terminal cleanup: devices revoked,
//     Turns settled or asked to cancel), releases its allocations and
//     reservations without cleanup (marked abandoned), records the
//     abandonment durably and removes the node. The record
//     (node_abandonments, node_abandoned_resources; there is no audit
//     table yet) names the node, the action, the abandoned backend, the
//     owner epoch, the database time and exactly which allocations,
//     incarnations, snapshots and reservations were abandoned, with their
//     native identities; the admin API answers with Berth names and
//     counts, and the action is logged. Core deletes nothing on either
//     engine: whatever the abandoned allocations left on the bound backend
//     is the operator's to remove (it carries the installation's and
//     allocation's labels). A retry on the removed node returns the same
//     abandonment.
//   - Core publishes to each node the generations it must serve
//     (store.NodeGenerations: the committed one while the node is enabled,
//     and every generation an unreleased allocation or placement on it is
//     bound to) with ServeGenerations: on every connection before the
//     node's Proxy is offered to any caller, at once after a commit
//     (Manager.Publish), and whenever the set changes (checked with every
//     presence record). A node never serves a generation of its own.
//   - A node is ready only for the committed deployment generation: every
//     time Core records a node's presence it checks the node's status of
//     that generation (Binding.Check: provider kind, served, and the
//     deployment digest both sides compute with
//     providers.DeploymentDigest) and records the node's probe result for
//     it. A mismatch keeps the node connected but records it not ready
//     with a fixed diagnostic code (provider_kind_mismatch,
//     generation_mismatch, specification_mismatch), so placement never
//     chooses it. Before the first commit a node serves nothing and is
//     recorded not ready (no_committed_generation, generation 0).
//   - A node is bound to its native backend when it first serves the
//     committed generation (store.Owner.BindNodeBackend, once per node
//     identity); a later status with another backend fingerprint is
//     backend_fingerprint_mismatch: the node's allocations resolve to the
//     bound backend and are never repointed.
//   - No call reaches a node whose backend differs from its binding: the
//     Manager reads the binding before it offers a connection's Proxy,
//     and Provider and every call of the Proxy refuse (ErrBackendMismatch,
//     reason backend_fingerprint_mismatch; nothing is sent) while a
//     generation the connection serves reports another fingerprint. So
//     the node's lifecycle worker claims, creates, observes and cleans up
//     nothing there: a Kill on the wrong engine would find nothing, place
//     a tombstone and let Core release allocations whose compute still
//     runs on the bound engine. The allocations stay owned, the Session
//     API reports the running ones with compute_reason
//     backend_fingerprint_mismatch, and everything resumes (deleted
//     Sessions' cleanup included) once the agent runs on its bound
//     backend again. A binding not read yet (the store failed) sends
//     nothing either; a node never bound holds nothing, so calls to it
//     pass.
//   - A call about an allocation carries the allocation's own committed
//     generation: the node routes it to that generation's adapter, and
//     refuses it (fenced) when it does not serve that generation.
//   - Presence is one predicate, the database's (node_present, migration
//     0019; store.NodePresence.Present): Core still holds the node's
//     connection, under the owner epoch of the unexpired execution lease,
//     and its latest health report arrived less than 45 seconds ago by
//     the database clock. The Manager records the connection's latest
//     report every 5 seconds with its age (the time since it arrived, on
//     Core's monotonic clock), never as a new one, so a node whose health
//     reports stop while its connection lives stops counting as present
//     45 seconds after its last report. Placement applies the predicate,
//     and GetNode, ListNodes, GetDeployment and the berth.node.connected
//     gauge report it; Presence (the Manager's) only says whether a
//     connection is held.
//   - A Registry Node carries no presence, readiness or capacity; those
//     are the Manager's observations, added by the adapter.
package nodes
