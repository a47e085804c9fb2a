// Package sessions is the logic of Sessions and their allocations: it
// creates, deletes and reads Sessions, reads allocations and the Runtime
// readiness of their connections, and derives what the records prove
// (State, EnvironmentOf, AllocationStateOf). It speaks domain terms only
// (uuids, keyset cursors and limits, its own field names) and knows
// nothing of gRPC; core/sessionadmin is its thin berth.admin.v1
// SessionService and AllocationService adapter.
//
// Create commits the Session, its Environment, placement and allocation
// (with the device's sealed credential and a fresh create receipt) in one
// store transaction before any Create; the lifecycle worker
// (core/lifecycle) sends the one Create the receipt permits.
//
// Rules:
//   - Creation and deletion are fenced lifecycle writes: the Store is the
//     owner-bound store (a *store.Owner). The reads are plain reads of the
//     same store.
//   - The raw device credential never reaches the store, a log or an
//     error: the store keeps its SHA-256 digest (for authentication) and
//     its ciphertext sealed under the installation key, bound to the
//     installation and the allocation id.
//   - A Session's state and readiness, and an allocation's state, are
//     derived only from recorded evidence (State, EnvironmentOf,
//     AllocationStateOf); nothing is assumed, and no readiness fact is
//     inferred from another.
//   - Every entry takes the call's projects.Scope. A Session belongs to
//     one project and to that project's tenant (read from the project,
//     never from the caller): the one CreateRequest names, else the
//     scope's, else (administrator) the default project. A Session or
//     project the scope does not see is errdefs.ErrNotFound, the answer a
//     missing one gets (projects.GetSession), so a project's caller cannot
//     probe another project's names. The scope is checked by a read before
//     a write by id; a Session's project never changes, so the write acts
//     on the Session the read saw.
//   - Deletion is one terminal cleanup transaction (store.Termination):
//     device revoked, Environment recorded deleted, queued Turns ended
//     (session_deleted), the running Turn asked to cancel, cleanup
//     requested. Only then does the lifecycle worker kill the compute.
//     Nothing refuses it: not a disabled provider, not a missing node.
//   - An admin's suspend-now (Suspend) is the idle suspension without its
//     idle time: the same predicate (session_idle_since: at least one Turn
//     ended, none queued or running; Berth has no other pending work: input
//     is a queued Turn, and a Session whose creation has not settled is
//     refused compute_not_running) decides the request, the candidate
//     scan, the arming and the capture claim. A refusal says what to wait
//     for: no_turn_ended (the first Turn's end), session_busy (the queued
//     or running Turn's end).
//   - A fork (Fork; docs/fork.md) mints each child here like a created
//     Session and commits them all in one store.CreateFork; the lifecycle
//     worker captures and seeds. fork_unsupported is decided from the
//     deployment provider's declaration, never by a type assertion.
//   - Errors are errdefs classes. An invalid request names the logic's
//     field ("request_id", "display_name"); the adapter maps it to a
//     request path. No deployment (ErrNoDeployment), a disabled provider
//     (store.ErrProviderDisabled) or no capacity (store.ErrNoCapacity) is
//     a refusal whose message says what to do, and creates nothing.
package sessions
