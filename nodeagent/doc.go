// Package nodeagent is berth-nodeagent: the one process per compute host that
// serves the berth.sandboxnode.v1 protocol to Core and wraps the host's local
// adapter (Docker or microsandbox, whichever its configuration's provider
// names; it never branches on the kind).
//
// It holds the configuration file (config.go), the private state directory
// with the identity and the highest owner epoch seen (state.go,
// identity.go), enrollment (enroll.go), the per-call fence (fence.go), the
// Agent that runs operations on the adapter (agent.go), the gRPC service
// (server.go, checkpoint_server.go), Serve, which composes the process from
// named steps with one shutdown path (run.go), the capacity it reports
// (host.go), and every default of the process and its command
// (defaults.go).
//
// The capacity it reports (host.go) is the host's CPU, memory and disk
// less a reserve, its CPU times an overcommit factor; docs/node-agent.md
// gives the configuration and the formulas.
//
// Rules:
//   - The node serves the deployment generations Core publishes
//     (ServeGenerations, generations.go), never one from its file: one
//     adapter per generation, built through the registration table with
//     its own generations/<number> state directory, probed for every
//     health report. Beside each probe runs the adapter's upkeep
//     (providerapi.Built.Housekeep, optional: the Docker adapter removes
//     the tombstones it can prove unneeded), bounded by housekeepTimeout;
//     its count of receipts still held goes into the report, once per
//     backend. It is a construction-time hook rather than a provider
//     operation because it is the node's own upkeep: it acts on no
//     Reference Core names, and Core never calls it. A generation left out of a publication stops being
//     served and is closed once its calls have finished. A start serves
//     nothing until Core publishes; the file keeps only the host's own
//     settings (state directory, listen address, provider kind and the
//     adapter's node section, capacity).
//   - Every call is checked before the adapter is touched: exact protocol
//     version, the current connection id, an owner epoch no lower than the
//     highest ever seen (persisted in the state directory), and a
//     generation the node serves (it is routed to that generation's
//     adapter). A failed check never reaches the adapter.
//   - Operations that the adapter's declaration marks unsupported are
//     answered with the typed unsupported error before the adapter.
//   - Operations on one allocation run one at a time; each runs on a
//     context bounded by the caller's deadline. Nothing is ever resent,
//     after a reconnect or otherwise: an unknown outcome stays unknown.
//   - Errors cross the wire only as the fixed codes of platform/nodewire.
//   - Measuring capacity never fails: a figure that cannot be read is
//     reported as zero, never guessed, and a reserve larger than the host
//     leaves zero, never a negative figure.
//   - nodeagent imports sandbox and proto only; nothing imports nodeagent.
package nodeagent
