// Package memdirect is an in-memory direct provider for Core's tests: a
// Vendor (API keys of teams, each team's sandboxes with berth_* metadata
// and a lease, injectable faults) and a direct adapter over it, so that
// Core's direct lifecycle, its construction and its credential
// replacement (docs/direct-lifecycle-plan.md, steps 3 to 7) can be tested
// with real PostgreSQL and no vendor.
//
// Rules:
//   - It is a Core test double, never an adapter contract subject, like
//     test/internal/memprovider: no adapter test and no contracttest run
//     uses it, and the production registration table never holds it. The
//     shared contract suite drives real adapters against native-side
//     fixtures (sandbox/contracttest); memdirect's Vendor is not one.
//   - It is honest about what it does. Create records a sandbox in the
//     Vendor with the allocation's berth_* metadata (installation, tenant,
//     Environment, allocation) and reports it running with its bootstrap
//     complete: nothing runs in it, and no Runtime connects back. Renew
//     replaces the lease (the vendor kills a sandbox whose lease has
//     ended, on its own clock, Vendor.Advance); RunCommand answers exit 0
//     with no output.
//   - Ownership is the metadata, never a bare sandbox id: every call lists
//     by the allocation and requires all four berth_* values equal. A
//     listed sandbox with other values is foreign: the call is an
//     ownership error and touches nothing (Create also returns the absence
//     receipt: it sent nothing).
//   - Every native call runs under the adapter's one sandbox.CallFence, in
//     the Reference's turn (VerifyCredential and the probe in the zero
//     Reference's); Create runs through sandbox.Detach, so a Create whose
//     caller gave up keeps its turn and its count until the vendor call
//     has returned (at most CreateGrace after the cancellation, its
//     deadline still binding), and Exclude waits for it.
//   - An unknown Create settles by listing the metadata: the owned sandbox
//     settles it running; an empty listing is the absence receipt. That
//     receipt is justified only because (a) the listing holds the
//     Reference's turn, so no Create of this adapter about it runs,
//     (b) the Vendor's calls are atomic (a call that returned made its
//     effect or none), and (c) Core sends a Reference's calls to the one
//     adapter of its allocation's generation and excludes an adapter's
//     fence before it builds another for that generation
//     (docs/direct-lifecycle-plan.md §4, §6). A real vendor needs more
//     (E2B: a bound on how long a create can still commit,
//     docs/e2b-receipts.md §1.10).
//   - Its answers are about its key's team only: a key of another team
//     sees nothing of this team's sandboxes, so GetInfo answers the
//     absence receipt and Kill confirms absence while the sandbox runs on.
//     That is why the backend fingerprint names the team (Core binds it
//     per generation) and why VerifyCredential, which proves access and
//     not visibility, is not enough to replace a key: Core must see each
//     allocation's provider id through the new key.
//   - Errors are errdefs classes with fixed text; the Vendor's own text
//     (which quotes the API key it refused and sandbox ids) never passes
//     through, and the key is a sandbox.Credential, so no printer shows it.
//   - Checkpoints are unsupported (a direct provider; the guide ties
//     checkpoint support to node mode) through an embedded
//     sandbox.CheckpointsUnsupported over the declaration; observation and
//     discovery are unsupported; VerifyCredential is supported; the
//     credential is required.
package memdirect
