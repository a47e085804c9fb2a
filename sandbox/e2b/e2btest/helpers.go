package e2btest

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/e2b"
)

// Public is the public configuration object pointing both planes at f.
func (f *Fixture) Public() json.RawMessage {
	data, _ := json.Marshal(map[string]any{"api_url": f.URL, "sandbox_url": f.URL, "template": Template})
	return data
}

// Credential is the credential object of key.
func Credential(key string) sandbox.Credential {
	data, _ := json.Marshal(map[string]string{"api_key": key})
	return sandbox.NewCredential(data)
}

// Config decodes f's public object with key, through the adapter's
// configuration adapter (the admin API's path).
func (f *Fixture) Config(t testing.TB, key string) e2b.Config {
	t.Helper()
	n, err := e2b.Configuration().DecodeInput(sandbox.ConfigurationInput{Public: f.Public(), Credential: Credential(key)})
	if err != nil {
		t.Fatalf("decode fixture configuration: %v", err)
	}
	return n.(e2b.Config)
}

// Options are adapter options over f with its default key, a new
// installation and a private state directory.
func (f *Fixture) Options(t testing.TB) e2b.Options {
	t.Helper()
	return e2b.Options{Config: f.Config(t, f.Key), InstallationID: uuid.NewString(), StateDirectory: t.TempDir()}
}

// Provider is an adapter over f built from Options.
func (f *Fixture) Provider(t testing.TB) *e2b.Provider {
	t.Helper()
	p, err := e2b.New(f.Options(t))
	if err != nil {
		t.Fatalf("new adapter: %v", err)
	}
	return p
}
