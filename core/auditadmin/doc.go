// Package auditadmin is the thin gRPC adapter of
// berth.admin.v1.AuditService, served by the admin server
// (admin.Options.Services): ListAuditEvents forwards to core/audit's
// Trail.
//
// Rules:
//   - It only converts. The actor filter is "admin", "core" or
//     "key:<key id>"; the project filter a name
//     ("tenants/{tenant}/projects/{project}", admin.ProjectName) that
//     becomes the project's id; action_prefix, resource and outcome are
//     bounded text without control characters. Anything else is
//     INVALID_ARGUMENT naming the field; a filter never echoes its value.
//   - It pages through admin.Paginate on (occurred_at, id); the page token
//     scope holds every filter, so a token is refused with other filters
//     (pages.go; changing the scope or the cursor encoding invalidates
//     the tokens clients hold).
//   - An unset end_time is the database's now() - 5 s (the store's
//     default, documented on the request): a reader tailing the trail
//     does not skip a transaction that commits late.
//   - Only the administrator reaches it: the admin server's tap refuses
//     project keys every method outside the Session and Turn allow-list.
package auditadmin
