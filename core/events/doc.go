// Package events is Core's one way to say "something changed": a typed,
// in-process bus (Bus) of wake-ups. An Event is a Kind and one id; it
// carries no state, so a subscriber re-reads the store. One comparable
// type for every kind keeps the index (kind, id) and the wire payload
// ("kind:id") one thing each; a new kind is one constant.
//
// Rules:
//   - The one writer of a piece of state publishes its events after its
//     transaction committed, never inside it: Turn and Session by
//     core/turns (and Session, Turn by the writers of a terminal cleanup,
//     Terminated: core/sessions, core/suspension, core/nodes' abandon);
//     Phase by core/suspension; NodeServing by nodes.Manager; Generation
//     by core/deployment and core/reset (the empty provider, or the
//     committed one re-announced); Reset by core/deployment. NodeWork, DirectWork and KeysChanged are queued
//     by the store inside the writing transaction (pg_notify) and
//     PostgreSQL delivers them at commit, never on rollback.
//   - Only NodeWork, DirectWork and KeysChanged cross processes
//     (Kind.Crosses): Feed listens on the
//     store's channel (one connection, listened again after a pause) and
//     publishes what arrives, including this Core's own writes. The other
//     kinds are written and read only by the Core holding the lease.
//   - Delivery is at most once in process and lossy across processes;
//     the periodic scans and polls of every subscriber are the safety net.
//   - Publish never blocks: it records the event in each matching
//     Subscription (coalesced: a set, bounded) and signals it.
//   - A Subscription records every event published after Subscribe
//     returned, until it is taken: subscribe before the read a wait
//     guards, and no event between that read and the wait is lost.
//   - Synchronous dependencies (a gate before a commit, a query, closing
//     admission) are constructor arguments, not events.
package events
