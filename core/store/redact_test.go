package store_test

import (
	"testing"

	"berth.dev/core/store"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/redacttest"
)

// TestSecretsNeverPrint prints the store's inputs that hold a secret
// through fmt and slog, alone and held, and looks for the secret.
func TestSecretsNeverPrint(t *testing.T) {
	const cred = "presented-device-credential-never-printed"
	redacttest.Check(t, store.AcceptRuntimeParams{Credential: runtimebootstrap.NewSecret(cred)}, []byte(cred))
}
