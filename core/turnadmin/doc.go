// Package turnadmin is the thin gRPC adapter of berth.admin.v1.TurnService
// over the logic of core/turns: server.go forwards each method, convert.go
// parses resource names and the Turn message, maps the logic's field names
// to request paths (requestPaths) and store Turns to the API; ListTurns
// pages through admin.Paginate. Input-only fields (env, stdin) are never
// returned. The admin server converts errors once.
package turnadmin
