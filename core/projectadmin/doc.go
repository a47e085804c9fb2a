// Package projectadmin is the thin gRPC adapter of
// berth.admin.v1.ProjectService, served by the admin server
// (admin.Options.Services): its tenant and project calls forward to
// core/projects' Service.
//
// Rules:
//   - It only converts. Names ("tenants/{tenant}",
//     "tenants/{tenant}/projects/{project}") are checked with
//     admin.ValidateName (admin.TenantName, admin.ProjectName) and become
//     ids; request_id is checked with admin.ValidateRequestID. A project
//     named under another tenant than its own is NOT_FOUND, as a missing
//     one: the logic and the store decide it, not this package.
//   - An etag is the resource's stored revision in decimal; an empty one
//     is projects.AnyRevision, anything else not of that form is
//     INVALID_ARGUMENT etag. A stale etag is the store's refusal
//     etag_mismatch. update_mask may name only "display_name" (unset: it),
//     a project's also "limits.max_active_sessions" and
//     "limits.max_retained_sessions" (named and unset: no limit);
//     output-only fields of a created resource must be empty.
//   - The logic's field names map to request paths here (requestPaths):
//     "display_name" is "tenant.display_name" or "project.display_name",
//     "revision" is "etag".
//   - The list calls page through admin.Paginate; the page token scopes
//     (ListProjects' holds its parent) and the cursor encoding (creation
//     time in Unix microseconds, then the id's 16 bytes) are in pages.go;
//     changing either invalidates the page tokens clients hold.
//   - Only the administrator reaches it: core/admin refuses a project key
//     every ProjectService method (PERMISSION_DENIED
//     project_key_method_denied) before the body is read.
//   - A project key's token is in CreateProjectKey's first response only
//     (projects.KeyToken.Reveal, here and nowhere else); a retry, the
//     lists and the revocation show the key without it.
//   - It holds no state and makes no decision: refusals
//     (project_has_sessions, tenant_has_projects, etag_mismatch) are the
//     store's.
package projectadmin
