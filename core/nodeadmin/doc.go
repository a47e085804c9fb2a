// Package nodeadmin is the thin gRPC adapter of berth.admin.v1.NodeService,
// served by the admin server (admin.Options.Services): its enrollment
// token calls (create, list, revoke) forward to core/enrollment's Tokens,
// its node calls (list, get, enable, retire, remove) to core/nodes'
// Registry.
//
// Rules:
//   - It only converts. Requests become the logic's arguments: resource
//     names ("nodes/{node}", "enrollmentTokens/{token}") are checked with
//     admin.ValidateName and become ids, request_id is checked with
//     admin.ValidateRequestID and becomes a UUID, an unset ttl is
//     enrollment.DefaultTokenTTL (its bounds are the logic's). Results
//     become responses; errors are returned as they are, and the admin
//     server converts them once. server.go forwards, convert.go
//     converts. The logic's field names ("request_id", "ttl") are already
//     the request's paths, so there is no FieldPaths mapping; a new logic
//     field that differs gets one here.
//   - The list calls page through admin.Paginate. The page token scopes
//     and the cursor encoding (creation time in Unix microseconds, then
//     the 16 bytes of the id) are this adapter's, in pages.go; changing
//     either invalidates the page tokens clients hold.
//   - It adds what the logic does not know: presence, readiness and
//     capacity come from Liveness (Core's node connections), and are left
//     unset for a node Core holds no connection loop for.
//   - A token's text appears only in the CreateEnrollmentToken response;
//     no other response or error carries it.
//   - RemoveNode with abandon is Registry.Abandon; its response (and a
//     later RemoveNode of the removed node) carries the recorded
//     abandonment with Berth names and counts only, never the native
//     identities the durable record keeps.
//   - It holds no state and makes no decision: refusals (node_enabled,
//     node_removed, node_holds_allocations, abandon_backend_not_bound,
//     node_backend_not_mismatched, enrollment_token_used,
//     enrollment_token_spent) are the logic's and the store's.
package nodeadmin
