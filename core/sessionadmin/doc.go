// Package sessionadmin is the thin gRPC adapter of
// berth.admin.v1.SessionService (create, get, list, delete, suspend,
// resume and archive Sessions)
// and berth.admin.v1.AllocationService (list and get allocations,
// read-only) over core/sessions, served by the admin server
// (admin.Options.Services).
//
// Rules:
//   - One Server implements and registers both services: allocations are
//     the Sessions' compute, read through the same sessions.Service with
//     the same cursor encoding, and AllocationService has two read
//     methods; a package of its own would repeat the fixture, the cursor
//     and the depguard entry for nothing.
//   - It only converts: resource names ("sessions/{session}",
//     "allocations/{allocation}", admin.ValidateName) and request ids to
//     uuids, page_size and page_token to keyset cursors and limits
//     (admin.Paginate), the logic's results to responses (the states and
//     readiness the logic derives to their enums and fields), and the
//     logic's field names to request field paths (requestPaths:
//     "display_name" is "session.display_name"). It refuses output-only
//     fields set on a CreateSession. The admin server converts errors
//     once (admin.ToStatus), so refusals (no_deployment,
//     no_ready_node_with_capacity) pass as the logic returns them.
//   - Every call passes the caller's scope (admin.ScopeFrom) to the
//     logic, never a project of its own: a Session's project is the one
//     CreateSession's session.project names, else the default one, and a
//     Session or project the scope does not see is NOT_FOUND like a
//     missing one. ListSessions' project filter narrows the scope
//     (sessions.Service.Narrow), so a project that does not exist lists
//     nothing; the page token is bound to the filter.
//   - The adapter owns the page tokens: their scopes (method and filter)
//     and the cursor encoding (pages.go) are fixed, so a token minted
//     before keeps working and one for another method or filter is
//     refused.
//   - A project key's call sees its Sessions without node and
//     allocation: those are the operator's infrastructure names
//     (forCaller), and keys may not call NodeService or
//     AllocationService.
//   - An allocation never shows its provider's native id, its device
//     credential (digest or sealed), its device id or its create receipt.
package sessionadmin
