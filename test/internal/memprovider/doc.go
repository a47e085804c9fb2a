// Package memprovider is an in-memory sandbox.SandboxProvider for the
// scale simulator (berth.dev/test/scale): it lets one process serve the
// node protocol for a thousand simulated nodes without a container engine.
//
// Rules:
//   - It is honest about what it does: Create records the Reference in
//     memory and reports it running with its bootstrap complete (nothing
//     runs); GetInfo and Renew read that record (Renew extends nothing:
//     there is no lease); Kill removes it and keeps a tombstone, so a later
//     GetInfo answers with an explicit creation-absence receipt and a late
//     Create of the same Reference is ErrExists, as the Docker adapter's
//     tombstone does; RunCommand answers a fixed result (exit 0, no output)
//     for running compute.
//   - Everything else (checkpoints, observation, discovery, credential
//     verification) is declared unsupported with a reason code, and the
//     node agent answers it from the declaration before the adapter.
//   - It is a test double for load, never a substitute for an adapter's
//     contract suite: no adapter test uses it.
package memprovider
