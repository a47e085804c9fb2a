// Package nodeagent is berth-nodeagent: the one process per compute host that
// serves the berth.sandboxnode.v1 protocol to Core and wraps the host's local
// adapter (Docker or microsandbox).
//
// Rules: nodeagent imports sandbox and proto only; nothing imports nodeagent.
// Errors cross the wire only as the fixed codes of the shared mapping package.
package nodeagent
