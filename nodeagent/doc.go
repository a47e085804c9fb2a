// Package nodeagent is berth-nodeagent: the one process per compute host that
// serves the berth.sandboxnode.v1 protocol to Core and wraps the host's local
// adapter (Docker: the only node adapter built; the guide's microsandbox
// adapter is not).
//
// It holds the configuration file (config.go), the private state directory
// with the identity and the highest owner epoch seen (state.go,
// identity.go), enrollment (enroll.go), the per-call fence (fence.go), the
// Agent that runs operations on the adapter (agent.go), the gRPC service
// (server.go, checkpoint_server.go), Serve, which composes the process from
// named steps with one shutdown path (run.go), and every default of the
// process and its command (defaults.go).
//
// Rules:
//   - Every call is checked before the adapter is touched: exact protocol
//     version, the current connection id, an owner epoch no lower than the
//     highest ever seen (persisted in the state directory), and the
//     deployment generation. A failed check never reaches the adapter.
//   - Operations that the adapter's declaration marks unsupported are
//     answered with the typed unsupported error before the adapter.
//   - Operations on one allocation run one at a time; each runs on a
//     context bounded by the caller's deadline. Nothing is ever resent,
//     after a reconnect or otherwise: an unknown outcome stays unknown.
//   - Errors cross the wire only as the fixed codes of sandbox/nodewire.
//   - nodeagent imports sandbox and proto only; nothing imports nodeagent.
package nodeagent
