// Package lifecycle drives allocations to their provider: one serial
// Worker per node creates (a fork's child seeded: fork.go), observes,
// keeps alive, suspends, restores, captures forks and cleans up, and one more, keyed DirectLane, does the same for every
// allocation of a direct provider (no node: Core calls the adapter); a
// thin Coordinator starts, drains and stops the workers. The
// narrative of the rules below, with the guide's reasons, is
// docs/lifecycle.md.
//
// Rules:
//   - One serial worker per node; a pass runs its pieces (pieces.go) in a
//     fixed order, one page each, each with its own cursor and narrow store
//     interface. One probe (store.ProbeNodeWork) first says which pieces
//     have a row; those without are skipped until one runs, so an idle
//     node's pass is two reads: the probe and its observation page. A
//     drain stops it between operations, never inside one.
//   - A node between passes costs its Worker (its cursors and pieces:
//     1,444 bytes of heap, measured with 10,000 workers) and a place in
//     the Coordinator's heap: no goroutine, timer or channel. The
//     Coordinator's one scheduler goroutine starts each pass on a
//     goroutine that ends with it, at most one per node, so a stuck
//     provider holds its own node's pass only.
//   - Running compute found as last recorded is not written per
//     allocation: the page's one mark lists it (observation_marks,
//     store.RecordObservationMark), which observation_time and so the due
//     flag count. A change is written on the allocation's row at once. A
//     node's page is read in one call where the provider batches
//     (infoBatcher: the node protocol's ObserveBatch); only its typed
//     unsupported error permits per-target reads.
//   - A Create or a capture or restore is sent only after its receipt was
//     claimed, and never again; an unknown outcome is only observed.
//   - Only a settled running Info or an explicit absence receipt settles a
//     creation; an abandoned restore needs its instance's exact evidence.
//   - An allocation is released only after confirmed cleanup and settled
//     creation; Kill follows terminal cleanup, after the cancel drain.
//   - No transaction is held across a provider call; every call is
//     bounded, and an outcome is recorded with a detached, bounded context.
//   - Every store write is fenced by the owner epoch; ErrSuperseded stops
//     the pass. Compute-phase state is written only through
//     core/suspension (Config.Suspension), which also announces each
//     transition; the worker decides and calls the provider.
//   - The direct lane is a worker like a node's, with the same pieces and
//     rules; its scans read the allocations whose node is NULL. A Create
//     is claimed only when Config.Serves says the lane can serve the
//     allocation's generation now (its adapter built and not fenced), so
//     no receipt is spent on a call refused before any I/O. Its keepalive
//     also runs during Turns: a native lease ends compute mid-Turn.
//   - A disabled provider gets no new Create and no restore; cleanup and
//     observation go on. A node Core refuses to call gets no pass; its
//     running compute is recorded unavailable with the refusal's reason.
//   - Lifecycle decisions (abandonment, expiry, due observations) use the
//     database clock. The device credential never reaches a log or error.
//   - An owner failure (a drain past its bound) has two sinks, each a
//     narrow interface: Config.Admission closes admission (the effect) and
//     Config.OwnerFailures records it in the audit trail (the record of a
//     decision with no transaction to share, since admission is in
//     memory). The second is not a signal anyone acts on: it must not
//     block, and a failed record changes nothing.
package lifecycle
