// Package redact gives secret types their one printed form.
//
// A secret type embeds Redacted, which makes every printer show
// "[redacted]": fmt with any verb (String, GoString, Format), slog
// (LogValue) and encoding/json (MarshalJSON, which slog's JSON handler
// uses for a struct holding one). The secret itself sits behind a pointer
// or in a func in the embedding type, so fmt's reflection (a struct in an
// unexported field, a mismatched verb) shows only an address.
//
// Rules:
//   - Reading the secret is the embedding type's explicit Reveal; writing
//     it to a file or the wire is the caller's explicit choice.
//   - redact imports nothing of Berth.
package redact
