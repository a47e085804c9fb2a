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
// named steps with one shutdown path (run.go), the capacity it reports
// (host.go), and every default of the process and its command
// (defaults.go).
//
// The capacity section of the configuration file (every field optional):
//
//	"capacity": {
//	  "reserve": {"cpu_millis": 500, "memory_bytes": 1073741824, "disk_bytes": 5368709120},
//	  "cpu_overcommit": 1.0
//	}
//
// reserve.* is kept back from sandboxes for the kernel, the engine and the
// agent; a field left out is the larger of its floor (500 millis, 1 GiB,
// 5 GiB) and 10 % of the host's total (CPU, MemTotal, the disk
// filesystem's size); a field set, even to 0, is used as is; negative is
// refused. cpu_overcommit (1 to 16, default 1) multiplies the CPU left
// after the reserve. Memory and disk are never overcommitted. Hello and
// every health report carry cpu_millis = (host - reserve) x factor,
// memory_bytes = MemTotal - reserve and disk_free_bytes = free - reserve,
// each at least 0. Disk is measured on the engine's data root (the Docker
// engine's DockerRootDir, named by the first generation's adapter: before
// Core publishes a generation, on the state directory) when the agent can
// see that directory, else on the state directory, and the agent logs the diagnostic
// disk_data_root_not_visible (at start and at each change, never failing):
// an agent in a container should mount the data root at the same path.
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
