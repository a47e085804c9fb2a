// Package e2b is the E2B Sandbox Provider: a direct adapter (Core
// constructs it) that creates one E2B sandbox per allocation from the
// Runtime template and starts berth-runtime in it (facts and sources:
// docs/e2b-receipts.md).
//
// Decision: a Go client of E2B's REST API and envd's Connect API
// (client.go: net/http, JSON codec by hand), not the vendor's Node SDK
// behind a helper. The guide prefers the vendor SDK; it was weighed and
// rejected (receipts §5): its commands are bash strings with lossy,
// unbounded text output; it reaches a sandbox only through connect, which
// resumes; it replays on 429 and hides whether a request was written; and
// it would need a pinned Node on every Core host. The client makes one
// connection per request and no retry, so nothing is resent, and
// httptrace proves a request that was never written.
//
// Rules:
//   - Ownership is the berth_* metadata (installation, tenant,
//     Environment, allocation), written once at create. Every call lists by
//     berth_allocation and re-checks every key of every result (and of the
//     GET by a listed id); a sandbox with any other value is foreign and is
//     never touched. A bare sandbox id is never trusted.
//   - Every native call runs under the adapter's one sandbox.CallFence,
//     one per Reference at a time. Create and Kill run through
//     sandbox.Detach: a caller that gives up gets an unknown outcome while
//     the HTTP exchange keeps the Reference's turn until it has ended.
//   - Settling an unknown Create: absence is given only on (a) a complete
//     4xx answer, (b) proof the request was never written, or (c) a listing
//     by metadata that finds nothing while no Create of this adapter for
//     the Reference runs (the fence) and the create receipt
//     (ProcessPaths.State/e2b/creates, 0700/0600, written before the POST,
//     removed when settled) is absent or began at least SettleAfter (120 s)
//     ago. E2B publishes no bound on how long a create can still commit;
//     its open-source API ends every request at 70 s (receipts §1.10).
//     The receipts are evidence: the state directory must outlive Core.
//   - The lease is the create timeout and the value Renew sets again
//     (E2B replaces endAt); Renew never revives, and E2B kills at endAt.
//   - The bootstrap file (0600) and Core's CA (0644) are written by
//     `install -m MODE /dev/stdin PATH` with their bytes in stdin only; the
//     Runtime starts tagged berth-runtime, and envd's List of that tag is
//     GetInfo's bootstrap evidence. The envd token comes from E2B's answer
//     (create, or GET for each later operation), never persisted or logged.
//   - RunCommand sends an argv (no shell); output is kept byte for byte
//     up to the limit; a broken stream is ErrCommandUnconfirmed and the
//     process is SIGKILLed best-effort.
//   - Never done: connect, resume or pause; envd is never called for a
//     paused sandbox; no error carries E2B's text, an id, a URL or a key.
//
// Checkpoints are declared unsupported. E2B's pause keeps the sandbox id
// (no incarnation identity), can resume implicitly (traffic, connect),
// and cannot thaw the same instance after an aborted pause; the guide
// ties checkpoint support to node mode, and E2B is direct. Sandboxes are
// created with autoPause off, and a paused one is only observed.
package e2b
