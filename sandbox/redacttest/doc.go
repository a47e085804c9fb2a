// Package redacttest checks that a secret type never prints, for the tests
// of the packages that define one.
//
// Rules:
//   - A secret type implements String, Format and LogValue, so no printer
//     shows it: fmt with any verb, slog's text and JSON handlers. A type
//     whose kind is string or []byte also implements MarshalJSON, because
//     slog's JSON handler marshals a struct that holds one with
//     encoding/json without asking the field for its LogValue; the wire
//     format that must carry the secret writes it explicitly (Reveal).
//   - fmt prints a value read from an unexported field by reflection,
//     without its methods, and a mismatched verb on a pointer (%s of a
//     pointer to an array, slice, map or struct) prints what it points to,
//     again without methods. So a secret type keeps its bytes where
//     reflection shows only an address: inside a func (nodetls's hidden)
//     or behind a pointer to a string, never in a string, slice or array
//     field or behind a pointer to one of those composites.
//   - Check prints the value itself, a pointer to it, and either held in an
//     exported and in an unexported struct field, and looks for the secret
//     in the forms a printer would give it: as text, quoted, hex, base64
//     and fmt's list of byte values.
package redacttest
