// Package clients runs the example agent loops of the generated Python
// and TypeScript clients (clients/python/examples/agent_loop.py,
// clients/typescript/examples/agent-loop.ts) as a user runs them, against
// a real berth-core with its Runtime gateway and a real berth-nodeagent
// over the test engine: each creates a Session, waits until its Runtime
// admits Turns, runs one Turn streaming its output, and deletes the
// Session. The test checks what the loop printed and its exit status
// against the command's, and then the world: the Session is DELETED by
// the admin API, its one Turn completed with the command's status, and the
// engine holds nothing of the installation.
//
// The clients' tools (Debian's python3-grpcio and python3-protobuf, the
// npm packages of clients/typescript/package-lock.json) are provisioned by
// scripts/gen-clients --provision-only, which make verify runs first.
package clients
