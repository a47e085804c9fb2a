// Package writers finds the callers of store writes in the core module,
// so a package's test can prove it is their one writer (core/suspension,
// core/turns). It type-checks every non-test package of the module from
// source against the export data `go list -export` builds, and reports
// each selection of a listed method outside the allowed package: a method
// of a type of core/store (or its generated queries), or of an interface
// declared in the core module, where a store type is passed to satisfy
// it. core/store itself, test files and test-helper packages (names
// ending in "test") are exempt. It is imported only by tests.
//
// Rules:
//   - Standard library only: it must not import a Core package, so that
//     the packages it checks can import it from their tests.
//   - A package is exempt only by the three rules above; there is no
//     per-call allow list.
package writers
