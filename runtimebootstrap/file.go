package runtimebootstrap

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/google/uuid"
)

// Version is the only bootstrap file version this build reads and writes.
const Version = 1

// Bounds on the file, checked by Validate.
const (
	MaxCoreURLBytes    = 2048
	MinCredentialBytes = 32
	MaxCredentialBytes = 512
)

// Path is where adapters place the file inside the sandbox (mode 0600,
// owned by the Runtime user 1000:1000).
const Path = "/home/runtime/runtime-bootstrap.json"

// CAFile is the name of the file, beside the bootstrap file (CAPathBeside),
// that holds the PEM CA certificate a Runtime trusts for Core's https
// URL when Core's gateway certificate is issued from the installation CA.
// It is not part of the bootstrap file, whose format is fixed; an adapter
// writes it only when Core gives one (mode 0644).
const CAFile = "core-ca.pem"

// SourceStateFiles are the files beside Path that belong to the sandbox
// they were written in and never to a copy of its home in another one (a
// fork's child): the bootstrap file and the CA file (the source's device
// credential and trust) and the park marker and wake file (its parked
// Runtime). An adapter that seeds a sandbox from a snapshot removes them
// from the copy, then writes the child's own bootstrap file, so the
// child's Runtime starts unparked and authenticates as the child.
func SourceStateFiles() []string {
	dir := filepath.Dir(Path)
	return []string{Path, CAPathBeside(Path), filepath.Join(dir, ParkMarkerName), filepath.Join(dir, WakeFileName)}
}

// ParkMarkerName and WakeFileName are the names, beside the bootstrap
// file, of a parked Runtime's marker and wake file (internal/park writes
// them under these names).
const (
	ParkMarkerName = "runtime-parked"
	WakeFileName   = "runtime-parked.pid"
)

// MaxCABytes bounds the CA file.
const MaxCABytes = 64 << 10

// ValidateCA checks a CA file's content: empty (no file), or at most
// MaxCABytes of PEM holding CERTIFICATE blocks only, each a parseable
// certificate.
func ValidateCA(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if len(data) > MaxCABytes {
		return errors.New("core CA: too large")
	}
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if len(bytes.TrimSpace(rest)) != 0 {
				return errors.New("core CA: not PEM")
			}
			break
		}
		if b.Type != "CERTIFICATE" {
			return errors.New("core CA: a PEM block is not a certificate")
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return errors.New("core CA: a certificate does not parse")
		}
		n++
	}
	if n == 0 {
		return errors.New("core CA: no certificate")
	}
	return nil
}

// CAPathBeside is the CA file's path for the bootstrap file at
// bootstrapPath.
func CAPathBeside(bootstrapPath string) string {
	return filepath.Join(filepath.Dir(bootstrapPath), CAFile)
}

// BinaryPath is where a Runtime image installs berth-runtime.
const BinaryPath = "/usr/local/bin/berth-runtime"

// The exit codes of WakeCommand besides 0 (signalled).
const (
	// WakeNotParked: no Runtime is parked (it woke already, or never
	// parked).
	WakeNotParked = 4
	// WakeGone: the parked Runtime's process is gone.
	WakeGone = 5
)

// WakeCommand is the command Core runs inside a restored incarnation
// (RunCommandCompute) to wake its parked Runtime: it signals only the
// exact parked process (PID and start time) and exits 0, WakeNotParked
// or WakeGone.
func WakeCommand() []string {
	return []string{BinaryPath, "wake", "--bootstrap-file", Path}
}

// File is the Runtime bootstrap file's content.
type File struct {
	Version int `json:"version"`
	// CoreURL is Core's public URL, derived from the installation's
	// configured public URL, never from request headers.
	CoreURL string `json:"core_url"`
	// DeviceID is the Runtime device's identity (a canonical UUID).
	DeviceID string `json:"device_id"`
	// Credential is the device's dedicated credential; Core stores only its
	// digest.
	Credential Secret `json:"credential"`
}

// Secret is a credential. It prints as "[redacted]" with every fmt verb,
// through slog (LogValue) and through encoding/json (which slog's JSON
// handler uses for a struct holding one), so it cannot reach a log line or
// an error by accident; Reveal returns the value for the places that must
// send it (Encode writes it into the file explicitly).
//
// The value sits behind a pointer: fmt prints a struct by reflection,
// without asking its fields to format themselves, when the struct is in an
// unexported field or reached by a mismatched verb (%s of a pointer
// prints what it points to), and there a pointer shows only its address.
// A Secret is not comparable; compare Reveal values (in constant time).
type Secret struct {
	v *string
	_ [0]func()
}

// NewSecret returns s as a Secret.
func NewSecret(s string) Secret { return Secret{v: &s} }

const redacted = "[redacted]"

// Reveal returns the secret's value ("" for the zero Secret).
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

func (s Secret) String() string   { return redacted }
func (s Secret) GoString() string { return redacted }

// Format implements fmt.Formatter so that %v, %s, %q, %x and %#v all redact.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue is the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON is the redacted form: a Secret never marshals.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// Validate checks every field against the file's bounds. Its errors name the
// field and never include the submitted value.
func (f File) Validate() error {
	if f.Version != Version {
		return fmt.Errorf("bootstrap file: version: want %d", Version)
	}
	if err := validCoreURL(f.CoreURL); err != nil {
		return fmt.Errorf("bootstrap file: core_url: %w", err)
	}
	if !canonicalUUID(f.DeviceID) {
		return fmt.Errorf("bootstrap file: device_id: must be a canonical UUID")
	}
	c := f.Credential.Reveal()
	if len(c) < MinCredentialBytes || len(c) > MaxCredentialBytes {
		return fmt.Errorf("bootstrap file: credential: length out of bounds")
	}
	for _, r := range c {
		if r == 0 || unicode.IsSpace(r) || r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return fmt.Errorf("bootstrap file: credential: only printable ASCII without whitespace")
		}
	}
	return nil
}

func validCoreURL(raw string) error {
	if raw == "" || len(raw) > MaxCoreURLBytes {
		return fmt.Errorf("length out of bounds")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("scheme must be https or http")
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("must be an origin with an optional path and no user, query or fragment")
	}
	if strings.Contains(u.Path, "..") {
		return fmt.Errorf("path must not contain ..") //nolint:staticcheck // ST1005: ".." is the path element named, not punctuation
	}
	return nil
}

// canonicalUUID reports whether s is a UUID in its canonical lowercase,
// hyphenated 36-character form.
func canonicalUUID(s string) bool {
	id, err := uuid.Parse(s)
	return err == nil && id.String() == s
}

// Encode validates f and returns the file's bytes as an adapter writes them
// into the sandbox.
func Encode(f File) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	// The wire form spells the fields out: Secret never marshals.
	data, err := json.Marshal(struct {
		Version    int    `json:"version"`
		CoreURL    string `json:"core_url"`
		DeviceID   string `json:"device_id"`
		Credential string `json:"credential"`
	}{f.Version, f.CoreURL, f.DeviceID, f.Credential.Reveal()})
	if err != nil {
		return nil, fmt.Errorf("bootstrap file: encode: %w", err)
	}
	return data, nil
}
