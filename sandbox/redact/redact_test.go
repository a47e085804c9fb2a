package redact_test

import (
	"testing"

	"berth.dev/sandbox/redact"
	"berth.dev/sandbox/redacttest"
)

// secret is a secret type as the house writes them: the value behind a
// pointer, the printed form from the embedded Redacted.
type secret struct {
	redact.Redacted
	v *string
}

func TestEmbeddedRedactedNeverPrintsTheSecret(t *testing.T) {
	s := "hunter2-credential"
	redacttest.Check(t, secret{v: &s}, []byte(s))
}
