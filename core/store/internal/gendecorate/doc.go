// Command gendecorate writes package storeobs: for each of the store's
// views (Reader, Owner, Admin, Runtime) a wrapper type with the same
// exported methods that starts a span and records a call's duration
// around the view's method, after Coder's generated dbmetrics.
//
// Rules:
//   - It reads the views' method sets from the compiled store package
//     (go/types over the export data `go list -export` names), never
//     from hand-kept lists, so a method added to a view is wrapped at the
//     next `go generate` (in core/store) or `make generate`.
//   - The output (storeobs/zz_generated.go) is committed and never
//     edited; `make verify-generated` regenerates it and fails when the
//     committed file differs, and so does this package's test.
//   - A method whose first parameter is a context.Context is observed;
//     any other is passed through unchanged. Parameters and results are
//     renamed p0.., r0.. so no name of the store can shadow the wrapper's.
//   - It uses only the standard library; it opens no database and no
//     network.
package main
