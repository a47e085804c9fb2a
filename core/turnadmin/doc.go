// Package turnadmin is the thin gRPC adapter of berth.admin.v1.TurnService
// over the logic of core/turns, served by the admin server
// (admin.Options.Services).
//
// Rules:
//   - server.go only forwards; convert.go parses resource names and the
//     Turn message, maps the logic's field names to request paths
//     (requestPaths) and store Turns to the API. The admin server
//     converts errors once.
//   - Output-only fields set on a SubmitTurn are refused, naming the
//     field; input-only fields (env, stdin) are never returned.
//   - ListTurns pages through admin.Paginate; the page token scope (with
//     the parent) and the cursor encoding are in pages.go and fixed.
//   - StreamTurnOutput ends with the caller's context error when the
//     caller went away, never with a logic error it did not cause.
package turnadmin
