package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"berth.dev/sandbox/errdefs"
)

// KeySize is the master key's size (AES-256).
const KeySize = 32

// ErrOpen is the one failure of Open.
var ErrOpen = fmt.Errorf("sealed value does not open: %w", errdefs.ErrInvalid)

// Key is a master key. No printer shows it: String, Format and LogValue
// are redacted, and the bytes are held only inside a func, which fmt's
// reflection prints as an address (it would follow a pointer to an array
// for a mismatched verb) and encoding/json skips. A Key is not comparable.
type Key struct{ b func() *[KeySize]byte }

func keyOf(b [KeySize]byte) Key { return Key{b: func() *[KeySize]byte { return &b }} }

const redactedKey = "secrets.Key(redacted)"

// String prints nothing of the key.
func (Key) String() string { return redactedKey }

// Format prints nothing of the key, whatever the verb.
func (Key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redactedKey)) }

// LogValue prints nothing of the key.
func (Key) LogValue() slog.Value { return slog.StringValue(redactedKey) }

// NewKey returns a random master key.
func NewKey() (Key, []byte, error) {
	var b [KeySize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Key{}, nil, fmt.Errorf("new key: %w", err)
	}
	return keyOf(b), append([]byte(nil), b[:]...), nil
}

// KeyFromBytes wraps raw key bytes.
func KeyFromBytes(raw []byte) (Key, error) {
	if len(raw) != KeySize {
		return Key{}, errdefs.Invalid("master_key", "must be 32 bytes")
	}
	var b [KeySize]byte
	copy(b[:], raw)
	return keyOf(b), nil
}

// LoadOrCreateKeyFile reads the master key file, or creates it (mode 0600)
// with a new random key when it does not exist. A file others can read is
// refused.
func LoadOrCreateKeyFile(path string) (Key, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		key, raw, err := NewKey()
		if err != nil {
			return Key{}, err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return Key{}, fmt.Errorf("create master key: %w", err)
		}
		if _, err := f.Write(raw); err != nil {
			f.Close()
			return Key{}, fmt.Errorf("write master key: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return Key{}, fmt.Errorf("sync master key: %w", err)
		}
		return key, f.Close()
	}
	if err != nil {
		return Key{}, fmt.Errorf("stat master key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Key{}, errdefs.Invalid("master_key", "file must have mode 0600")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("read master key: %w", err)
	}
	return KeyFromBytes(raw)
}

func (k Key) aead() (cipher.AEAD, error) {
	if k.b == nil {
		return nil, errdefs.Invalid("master_key", "missing")
	}
	block, err := aes.NewCipher(k.b()[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts plaintext bound to b, returning a fresh random nonce and
// the ciphertext.
func (k Key) Seal(plaintext []byte, b Binding) (nonce, ciphertext []byte, err error) {
	aead, err := k.aead()
	if err != nil {
		return nil, nil, err
	}
	nonce = make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, fmt.Errorf("seal: %w", err)
	}
	return nonce, aead.Seal(nil, nonce, plaintext, b.ad), nil
}

// Open decrypts a sealed value bound to b. Any mismatch (key, nonce, data
// or binding) is ErrOpen.
func (k Key) Open(nonce, ciphertext []byte, b Binding) ([]byte, error) {
	aead, err := k.aead()
	if err != nil {
		return nil, err
	}
	if len(nonce) != aead.NonceSize() {
		return nil, ErrOpen
	}
	out, err := aead.Open(nil, nonce, ciphertext, b.ad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// Valid reports whether k holds key material.
func (k Key) Valid() bool { return k.b != nil }

// Derive returns a 32-byte key for purpose, derived from the master key
// with HMAC-SHA256, so each use has its own key and none reveals the
// master key.
func (k Key) Derive(purpose string) []byte {
	if k.b == nil {
		return nil
	}
	mac := hmac.New(sha256.New, k.b()[:])
	mac.Write([]byte("berth-derive:" + purpose))
	return mac.Sum(nil)
}
