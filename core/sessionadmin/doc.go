// Package sessionadmin serves berth.admin.v1.SessionService (create, get,
// list and delete Sessions) and berth.admin.v1.AllocationService (list and
// get allocations, read-only).
//
// Service is the logic, over sessions.Service and Core's store and
// testable without gRPC; NewSessionServer and NewAllocationServer are the
// thin gRPC layers that convert requests and responses, for admin.Options.Sessions and
// admin.Options.Allocations (the admin server converts their errors once,
// with admin.ToStatus).
//
// Rules:
//   - The admin API has no tenant: every Session the admin API creates
//     belongs to the one tenant id Core passes to NewService.
//   - A Session's state and readiness are derived only from recorded
//     evidence (see SessionState and Readiness); nothing is assumed.
//   - An allocation never shows its provider's native id, its device
//     credential (digest or sealed) or its create receipt.
//   - Errors are errdefs classes: an invalid request names its field; no
//     deployment or no capacity is a refusal (errdefs.Refusal:
//     no_deployment, no_ready_node_with_capacity) whose message says what
//     to do.
package sessionadmin
