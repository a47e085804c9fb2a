package enrollment

import (
	"testing"

	"berth.dev/sandbox/redacttest"
)

// TestSecretTypesNeverPrint prints the package's secret type and the
// result that holds one through fmt and slog, alone and held, and looks
// for the token's text and secret.
func TestSecretTypesNeverPrint(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"
	text := newTokenText("berth-enroll-v1.0123456789abcdef0123456789abcdef." + secret + ".00ff")
	for name, v := range map[string]any{"TokenText": text, "IssuedToken": IssuedToken{Text: text}} {
		t.Run(name, func(t *testing.T) { redacttest.Check(t, v, []byte(text.Reveal()), []byte(secret)) })
	}
}
