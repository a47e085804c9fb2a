// Package direct is Core's side of a direct provider (the guide's
// "direct" mode: no node agent, Core calls the adapter itself): a Set
// holds one built adapter per direct generation the lane serves, probes
// each and records its readiness, and its Provider routes each call of
// the direct lane's lifecycle worker (core/lifecycle, DirectLane) to the
// adapter of the allocation's own generation.
//
// Rules:
//   - The Set is the one writer of direct_readiness (store.Owner's
//     RecordDirectReadiness, fenced by the owner epoch) and promotes the
//     serving pin of a current direct generation. nodes.Manager promotes
//     it for node generations: the pin has these two writers because its
//     evidence comes from two places (a node's report, Core's own probe),
//     and they never promote the same generation, since a generation is
//     either a node one or a direct one (its stored mode).
//   - The generations served are store.Reader.DirectGenerations: the
//     current one when it is direct, and every direct generation the lane
//     still holds. An adapter is built once per generation through
//     providers.Registry.BuildDirect (the stored selectors, the opened
//     credential beside them, the fixed ProcessPaths) and closed only when
//     its generation holds nothing more, after its CallFence excluded
//     every call (timed-out callers' native work included).
//   - A generation is served (Serves, the check the lane's worker makes
//     before it claims a Create) only while its adapter is built and its
//     backend fingerprint matches the one first recorded for it: Core
//     never repoints a retained allocation at another vendor namespace.
//   - The Provider resolves every call's Reference to its allocation: a
//     Reference that is not a direct allocation's, or whose tenant,
//     Environment or generation differ, is refused and nothing is sent.
//     It adds no retry and no resend.
//   - A key replacement (Rekey, inside the lane's drain gate) excludes
//     every adapter of the kind, verifies the new key against every
//     retained generation and allocation reference, commits, and only
//     then swaps adapters; a refusal readmits the old ones unchanged. A
//     generation's adapter is always built with the credential
//     store.CredentialSource names for it.
//   - A direct adapter declares checkpoints unsupported (the guide:
//     checkpoints need node mode), so the lane's checkpoint pieces do
//     nothing.
//   - The Set learns of work from core/events (Generation, DirectWork) and
//     a periodic pass; it publishes nothing: a readiness change is read
//     by placement from the store.
package direct
