// Package secrets seals credentials that Core keeps at rest: AES-256-GCM
// under the installation's master key, with additional data that binds each
// ciphertext to what it belongs to (for example the installation and
// generation), so a ciphertext moved to another row does not open.
//
// Rules:
//   - Every Binding Core uses is made in binding.go, in one place; Seal and
//     Open take nothing else, so a value sealed without a binding does not
//     compile. A binding's bytes never change (a test pins them): stored
//     ciphertexts depend on them.
//   - Keys and plaintexts never appear in errors or logs (Key prints as
//     redacted); a failed Open says only that it failed.
//   - The store keeps the sealed bytes and knows none of this; secrets
//     imports no other Core package (errdefs only), so every Core package
//     may use it.
package secrets
