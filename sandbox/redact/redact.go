package redact

import (
	"fmt"
	"log/slog"
)

// Text is the printed form of every secret.
const Text = "[redacted]"

// Redacted is embedded by a secret type for its printed form.
type Redacted struct{}

// String is the redacted form.
func (Redacted) String() string { return Text }

// GoString is the redacted form.
func (Redacted) GoString() string { return Text }

// Format prints the redacted form for every verb.
func (Redacted) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Text)) }

// LogValue is the redacted form.
func (Redacted) LogValue() slog.Value { return slog.StringValue(Text) }

// MarshalJSON is the redacted form: a secret never marshals.
func (Redacted) MarshalJSON() ([]byte, error) { return []byte(`"` + Text + `"`), nil }

// String is a secret string: it prints as Text, and only Reveal returns
// it. The text sits behind a pointer (see the package comment), so a
// String is not comparable. Secret types that are strings embed it.
type String struct {
	Redacted
	v *string
	_ [0]func()
}

// NewString returns s as a secret String.
func NewString(s string) String { return String{v: &s} }

// Reveal returns the secret ("" for the zero String).
func (s String) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}
