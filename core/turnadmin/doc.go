// Package turnadmin serves berth.admin.v1.TurnService over the logic of
// core/turns: it parses resource names and the Turn message, pages
// ListTurns through admin.Paginate, and maps store Turns to the API.
// Input-only fields (env, stdin) are never returned.
package turnadmin
