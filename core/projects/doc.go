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
package projects
