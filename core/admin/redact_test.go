package admin

import (
	"testing"

	"berth.dev/sandbox/redacttest"
)

// TestSecretTypesNeverPrint prints the package's key holder through fmt
// and slog, alone and held, and looks for the key.
func TestSecretTypesNeverPrint(t *testing.T) {
	key := []byte("page-token-key-never-printed-0123456789")
	p, err := NewPageTokens(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"*PageTokens": p, "PageTokens": *p} {
		t.Run(name, func(t *testing.T) { redacttest.Check(t, v, key) })
	}
}
