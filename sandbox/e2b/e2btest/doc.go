// Package e2btest is the E2B adapter's loopback fixture: one httptest
// server that speaks the control plane (API keys of teams, several per
// team and revocable; create, get, list with E2B's metadata filter and
// paging at 100 with X-Next-Token, timeout, kill, expiry at endAt on a
// fake clock) and envd's process service (Connect, JSON codec: Start,
// SendInput, CloseStdin, SendSignal, List) routed by E2b-Sandbox-Id, for
// the facts in docs/e2b-receipts.md §6, and the adapter's shared fault
// table.
//
// Rules:
//   - A sandbox's processes are local child processes, each in its own
//     process group with Pdeathsig, in the sandbox's own directory;
//     /home/runtime and /workspace arguments map into that directory, so
//     nothing of the host's is used. Runner is the hook that decides what
//     runs: DefaultRunner stubs berth-runtime with a process that only
//     stays alive; the black-box tests (test/e2b) run the real Runtime.
//   - Killing or expiring a sandbox kills its process groups and removes
//     its directory, so leaks are observable.
//   - It implements contracttest.Native (Arm, PlantForeign, ForeignIntact,
//     Calls, Sensitive) and records every request (Requests) and every
//     argv it ran (Argv), so tests assert no replay, no connect or
//     resume, and no secret in argv.
//   - Its error bodies carry a fixed native text that must never reach
//     an adapter error (Sensitive lists it with the keys, tokens, ids and
//     the endpoint).
package e2btest
