package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestSealOpenBindsAdditionalData(t *testing.T) {
	k, raw, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	nonce, ct, err := k.Seal([]byte("ca private key"), []byte("berth-ca:inst-1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, []byte("ca private key")) {
		t.Fatal("ciphertext holds the plaintext")
	}
	out, err := k.Open(nonce, ct, []byte("berth-ca:inst-1"))
	if err != nil || string(out) != "ca private key" {
		t.Fatalf("open: %q %v", out, err)
	}
	other, _, _ := NewKey()
	tampered := append([]byte(nil), ct...)
	tampered[0] ^= 1
	for name, f := range map[string]func() ([]byte, error){
		"other ad":    func() ([]byte, error) { return k.Open(nonce, ct, []byte("berth-ca:inst-2")) },
		"other key":   func() ([]byte, error) { return other.Open(nonce, ct, []byte("berth-ca:inst-1")) },
		"tampered":    func() ([]byte, error) { return k.Open(nonce, tampered, []byte("berth-ca:inst-1")) },
		"short nonce": func() ([]byte, error) { return k.Open(nonce[:4], ct, []byte("berth-ca:inst-1")) },
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
	nonce, ct, _ := k1.Seal([]byte("x"), nil)
	if _, err := k2.Open(nonce, ct, nil); err != nil {
		t.Fatal("reloaded key differs")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKeyFile(path); err == nil {
		t.Fatal("world-readable key accepted")
	}
}
