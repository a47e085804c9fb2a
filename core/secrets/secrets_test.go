package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"berth.dev/sandbox/redacttest"
	"github.com/google/uuid"
)

func TestSealOpenBindsAdditionalData(t *testing.T) {
	k, raw, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	nonce, ct, err := k.Seal([]byte("ca private key"), InstallationCAKey("inst-1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, []byte("ca private key")) {
		t.Fatal("ciphertext holds the plaintext")
	}
	out, err := k.Open(nonce, ct, InstallationCAKey("inst-1"))
	if err != nil || string(out) != "ca private key" {
		t.Fatalf("open: %q %v", out, err)
	}
	other, _, _ := NewKey()
	tampered := append([]byte(nil), ct...)
	tampered[0] ^= 1
	for name, f := range map[string]func() ([]byte, error){
		"other ad":    func() ([]byte, error) { return k.Open(nonce, ct, InstallationCAKey("inst-2")) },
		"other key":   func() ([]byte, error) { return other.Open(nonce, ct, InstallationCAKey("inst-1")) },
		"tampered":    func() ([]byte, error) { return k.Open(nonce, tampered, InstallationCAKey("inst-1")) },
		"short nonce": func() ([]byte, error) { return k.Open(nonce[:4], ct, InstallationCAKey("inst-1")) },
	} {
		if _, err := f(); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if s := fmt.Sprintf("%v %+v %#v %s", k, k, k, k); bytes.Contains([]byte(s), raw) || bytes.Contains([]byte(s), []byte(fmt.Sprintf("%d", raw))) {
		t.Fatal("key formatted")
	}
}

func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "master.key")
	k1, err := LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	k2, err := LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nonce, ct, _ := k1.Seal([]byte("x"), InstallationCAKey("i"))
	if _, err := k2.Open(nonce, ct, InstallationCAKey("i")); err != nil {
		t.Fatal("reloaded key differs")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKeyFile(path); err == nil {
		t.Fatal("world-readable key accepted")
	}
}

// TestBindingsAreStable pins every binding's bytes: values sealed by an
// earlier Core must keep opening, so a binding never changes form.
func TestBindingsAreStable(t *testing.T) {
	inst := uuid.MustParse("11111111-1111-4111-8111-111111111111")
	id := uuid.MustParse("22222222-2222-4222-8222-222222222222")
	for _, c := range []struct {
		b    Binding
		want string
	}{
		{DeviceCredential(inst, id), "berth-device-credential:" + inst.String() + ":" + id.String()},
		{TurnInput(inst, id), "berth-turn-input:" + inst.String() + ":" + id.String()},
		{DeploymentCredential(inst, 42), "berth-deployment-credential:" + inst.String() + ":42"},
		{InstallationCAKey(inst.String()), "berth-installation-ca:" + inst.String()},
	} {
		if string(c.b.ad) != c.want {
			t.Errorf("binding %q, want %q", c.b.ad, c.want)
		}
	}
	// Distinct kinds never collide, even for the same ids.
	if string(DeviceCredential(inst, id).ad) == string(TurnInput(inst, id).ad) {
		t.Fatal("two kinds share a binding")
	}
}

// TestKeyNeverPrints prints a master key through fmt and slog, alone and
// held, and looks for its bytes.
func TestKeyNeverPrints(t *testing.T) {
	key, raw, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	redacttest.Check(t, key, raw)
}
