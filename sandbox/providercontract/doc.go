// Package providercontract holds the explicit operation declaration every
// provider returns, the typed error of an unsupported operation, and the
// rules that validate a declaration against a method inventory.
//
// Rules: the package is a leaf over errdefs. It knows nothing about the
// concrete provider interfaces; sandbox.ValidateOperations derives the
// inventory from them by reflection and calls Validate, so there is no
// second hand-kept list of methods. Every error it returns is safe to show:
// it carries fixed codes and inventory operation names, never submitted
// values or native text.
package providercontract
