// Package adaptercheck is the conformance check of Berth's gRPC adapter
// template (core/README.md, "Adapter template"): the core/<resource>admin
// packages and core/enrollmentgrpc. Check reads one package's source
// (go/parser, no type checking) and lists every way it strays; the test
// of this package runs it over every adapter of core and over a
// deliberately stray one in testdata.
//
// Rules:
//   - An adapter's non-test files are doc.go (its rules, nothing else),
//     server.go, convert.go and, when it pages, pages.go; nothing more.
//   - server.go declares type Server, func New returning *Server, or
//     (*Server, error) when New checks its arguments, and
//     func (s *Server) Register(g *grpc.Server).
//   - No exported constructor but New; exported functions only in
//     convert.go (conversions its tests call); no exported variable;
//     exported types other than Server only in server.go and only as what
//     New takes (a callback type and the values it returns).
//   - An adapter that pages (admin.Paginate) keeps its page token scopes
//     in pages.go.
//   - A problem is one line naming the package, the file and what strays,
//     so a failure says what to fix.
package adaptercheck
