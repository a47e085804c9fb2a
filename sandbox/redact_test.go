package sandbox_test

import (
	"encoding/json"
	"testing"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/redacttest"
)

// TestSecretTypesNeverPrint prints the package's secret type and the
// types that hold a secret through fmt and slog, alone and held, and looks
// for the secret.
func TestSecretTypesNeverPrint(t *testing.T) {
	cred := []byte(`{"token":"provider-credential-never-printed"}`)
	device := "device-credential-never-printed-0123456789abcdef"
	for _, c := range []struct {
		name   string
		value  any
		secret string
	}{
		{"Credential", sandbox.NewCredential(cred), "provider-credential-never-printed"},
		{"ConfigurationInput", sandbox.ConfigurationInput{Public: json.RawMessage(`{}`), Credential: sandbox.NewCredential(cred)}, "provider-credential-never-printed"},
		{"EncodedConfiguration", sandbox.EncodedConfiguration{Public: json.RawMessage(`{}`), Secret: sandbox.NewCredential(cred)}, "provider-credential-never-printed"},
		{"CreateRequest", sandbox.CreateRequest{Reference: ref, Bootstrap: runtimebootstrap.File{
			Version: runtimebootstrap.Version, CoreURL: "https://core.example.test", DeviceID: ref.AllocationID,
			Credential: runtimebootstrap.NewSecret(device),
		}}, device},
	} {
		t.Run(c.name, func(t *testing.T) { redacttest.Check(t, c.value, []byte(c.secret)) })
	}
}

func TestCredentialRevealsItsBytes(t *testing.T) {
	in := []byte("credential bytes")
	c := sandbox.NewCredential(in)
	in[0] = 'X'
	if string(c.Reveal()) != "credential bytes" || c.Len() != len(in) {
		t.Fatalf("Reveal = %q, Len = %d", c.Reveal(), c.Len())
	}
	if z := sandbox.NewCredential(nil); z.Reveal() != nil || z.Len() != 0 {
		t.Fatalf("empty credential reveals %q", z.Reveal())
	}
}
