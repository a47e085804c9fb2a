// Package providers is the provider registration table and the one place
// that validates, looks up and constructs adapters.
//
// Rules:
//   - registry.go is the only registration table. Registration is explicit
//     construction: no init-time registration, no plugin loading.
//   - ValidateRegistration is the single wiring check. Lookup, construction
//     and configuration handling run it before any configuration callback or
//     constructor, so a malformed registration never reaches native code.
//   - Errors are safe: an unknown kind is ErrInvalid, a malformed
//     registration a providercontract.ContractError; neither includes
//     submitted configuration or native diagnostics.
//   - Only the adapter interprets configuration; nothing here switches on a
//     provider kind.
package providers
