// Package runtimeobs is the observation contract: ownership-checked,
// read-only observations of an allocation's compute, singly (Source) or in
// bounded batches (BatchSource).
//
// Rules:
//   - The interfaces are defined in package sandbox (so that the operation
//     inventory sees them) and re-exported here under the guide's names.
//   - Observation never renews, starts, prepares or stops compute.
//   - ObserveAll falls back to one Observe per target only when
//     ObserveBatch is declared unsupported; any other batch failure is
//     returned as is, and a batch answer of the wrong length, order or
//     Reference is a contract violation.
//   - It imports the contract (sandbox, errdefs, providercontract) only.
package runtimeobs
