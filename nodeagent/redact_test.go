package nodeagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/sandbox/redacttest"
)

// testKeyPEM is a made-up key: only its text matters here.
const testKeyPEM = "-----BEGIN PRIVATE KEY-----\nTUM0Q0FRQXdFd1lIS29aSXpqMENBUVlJS29aSXpqMERBUWNF\n-----END PRIVATE KEY-----\n"

// TestSecretTypesNeverPrint prints the package's secret type and the
// identity that holds one through fmt and slog, alone and held, and looks
// for the key.
func TestSecretTypesNeverPrint(t *testing.T) {
	body := []byte(strings.Split(testKeyPEM, "\n")[1])
	id := Identity{NodeID: "node", InstallationID: "inst", KeyPEM: NewKeyPEM(testKeyPEM)}
	for name, v := range map[string]any{"KeyPEM": id.KeyPEM, "Identity": id} {
		t.Run(name, func(t *testing.T) { redacttest.Check(t, v, body) })
	}
}

// TestIdentityFileKeepsTheKey checks that the identity file, unlike the
// printers, carries the key.
func TestIdentityFileKeepsTheKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &StateDir{path: dir}
	want := Identity{NodeID: "node", InstallationID: "inst", CertificatePEM: "cert", KeyPEM: NewKeyPEM(testKeyPEM), CAPEM: "ca"}
	if err := s.SaveIdentity(want); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, IdentityFile))
	if err != nil || !strings.Contains(string(data), `"key_pem":"-----BEGIN PRIVATE KEY-----\nTUM0`) {
		t.Fatalf("identity file lacks the key (%v)", err)
	}
	got, err := s.LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if got.NodeID != want.NodeID || got.InstallationID != want.InstallationID || got.CertificatePEM != want.CertificatePEM ||
		got.CAPEM != want.CAPEM || got.KeyPEM.Reveal() != testKeyPEM {
		t.Fatalf("LoadIdentity = %v, key changed: %t", got, got.KeyPEM.Reveal() != testKeyPEM)
	}
}
