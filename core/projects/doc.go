// Package projects is the logic of tenants and projects, and the Scope
// every call of a Session or Turn is made in.
//
// Rules:
//   - A tenant is the ownership unit the engine sees: its id is the
//     TenantID of every Reference and of the engine's ownership labels,
//     and it never changes for a live resource. A project belongs to one
//     tenant and is the unit of scope (and, later, of keys and limits).
//     Every Session belongs to one project; its tenant is that project's.
//   - Scope is explicit: core/sessions and core/turns take one in every
//     entry, an administrator's call is All, a project's is In(project).
//     The zero Scope is invalid, so a forgotten scope fails instead of
//     widening.
//   - Another project's resource is indistinguishable from a missing one:
//     the same errdefs.ErrNotFound, from the same kind of single-row
//     indexed read with the project in its WHERE (the store's
//     GetSessionInProject), never a read followed by a comparison that
//     answers differently.
//   - Service is the administrator's management of tenants and projects
//     over a narrow Store; ids come from the injected newID. Creates are
//     idempotent by request id. Updates and deletions compare and set
//     the stored revision (the API's etag; AnyRevision acts at any): a
//     stale one is the refusal etag_mismatch and writes nothing.
//   - Deletion is soft (the rows stay: Sessions keep their foreign keys),
//     and a deleted tenant or project, or a project named under another
//     tenant, is ErrNotFound to every call and absent from the lists.
//     DeleteProject is refused project_has_sessions while any Session of
//     the project is not deleted with its compute released; DeleteTenant
//     tenant_has_projects while it has a live project. Each decides under
//     the row's lock, which CreateSession (CreateProject) holds shared, so
//     nothing is ever created in a deleted project (tenant). The default
//     tenant and project are deleted like any other once empty.
//   - Display names are unique among live tenants, and among a tenant's
//     live projects (ErrExists).
//   - A project key is "berth-key-v1.<id>.<secret>" (KeyToken, which no
//     printer shows); the store keeps only its SHA-256, so Keys.Create
//     returns the token once and a retry returns the key without it.
//     Revocation is final; expiry and liveness are decided on the
//     database clock (store.VerifyProjectKey: not revoked, not expired,
//     project live), so deleting a project ends its keys at once.
//   - KeyIndex is the key check core/admin runs in two stages: Check from
//     an in-memory copy of the live keys (no I/O: it runs as a call's
//     headers arrive), then Verify against the database before the
//     handler. The copy is reloaded whole on every keys_changed event (the
//     store NOTIFYs it in the writing transaction, so every Core hears
//     every change), every IndexReload, and by Keys.Create before it
//     returns a new token (so the Core that made the key accepts it from
//     the next call; Load is serialized, so an older read never replaces a
//     newer copy); Verify's positive answers are
//     reused for VerifyCache and forgotten on every keys_changed. A
//     Verify read in flight when a revocation commits may still cache its
//     answer: the bound is VerifyCache, after which the database decides
//     again. The index's copy can only be stale towards refusing less in
//     the tap; Verify overrules it for every call.
package projects
