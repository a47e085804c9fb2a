package nodetls

import (
	"encoding/base64"
	"math/big"
	"strings"
	"testing"

	"berth.dev/sandbox/redacttest"
)

// TestSecretTypesNeverPrint prints each of the package's secret types
// through fmt and slog, alone and held, and looks for the secret.
func TestSecretTypesNeverPrint(t *testing.T) {
	ca := newTestCA(t)
	text, _, tok := newParsedToken(t, ca)
	tokenSecret, err := base64.RawURLEncoding.DecodeString(strings.Split(text, ".")[2])
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ca.key().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		value   any
		secrets [][]byte
	}{
		{"Token", tok, [][]byte{tokenSecret, []byte(strings.Split(text, ".")[2])}},
		{"CA", ca, [][]byte{raw, []byte(new(big.Int).SetBytes(raw).String())}},
	} {
		t.Run(c.name, func(t *testing.T) { redacttest.Check(t, c.value, c.secrets...) })
	}
}
