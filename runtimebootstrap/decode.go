package runtimebootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MaxFileBytes bounds the bootstrap file. A valid file is well under 4 KiB;
// anything larger than this is rejected before it is parsed.
const MaxFileBytes = 64 << 10

// The file's keys, exactly as Encode writes them.
const (
	keyVersion    = "version"
	keyCoreURL    = "core_url"
	keyDeviceID   = "device_id"
	keyCredential = "credential"
)

var knownKeys = []string{keyVersion, keyCoreURL, keyDeviceID, keyCredential}

// Decode parses a bootstrap file strictly and validates it. It accepts
// exactly one JSON object holding exactly the four keys Encode writes, each
// once and spelled exactly (encoding/json alone would match keys
// case-insensitively and keep the last of duplicate keys), with nothing
// after the object but whitespace. Its errors name keys and byte offsets but
// never quote values or unknown keys, so they cannot carry the credential.
func Decode(data []byte) (File, error) {
	if len(data) > MaxFileBytes {
		return File{}, fmt.Errorf("bootstrap file: larger than %d bytes", MaxFileBytes)
	}
	values, err := decodeObject(data)
	if err != nil {
		return File{}, err
	}
	for _, k := range knownKeys {
		if _, ok := values[k]; !ok {
			return File{}, fmt.Errorf("bootstrap file: missing key %q", k)
		}
	}

	var f File
	if !isJSONInteger(values[keyVersion]) || json.Unmarshal(values[keyVersion], &f.Version) != nil {
		return File{}, fmt.Errorf("bootstrap file: %s: must be a JSON integer", keyVersion)
	}
	var credential string
	for _, s := range []struct {
		key string
		dst *string
	}{
		{keyCoreURL, &f.CoreURL},
		{keyDeviceID, &f.DeviceID},
		{keyCredential, &credential},
	} {
		raw := values[s.key]
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, s.dst) != nil {
			return File{}, fmt.Errorf("bootstrap file: %s: must be a JSON string", s.key)
		}
	}
	f.Credential = NewSecret(credential)
	if err := f.Validate(); err != nil {
		return File{}, err
	}
	return f, nil
}

// decodeObject reads the single top-level JSON object of data into its raw
// values, rejecting unknown, duplicate and case-aliased keys and trailing
// data. encoding/json's own error texts are never returned: a syntax error
// may quote the bytes it failed on.
func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	malformed := func() error {
		return fmt.Errorf("bootstrap file: malformed JSON near byte %d", dec.InputOffset())
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed()
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("bootstrap file: must be a JSON object")
	}
	values := make(map[string]json.RawMessage, len(knownKeys))
	for dec.More() {
		offset := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed()
		}
		key, ok := tok.(string)
		if !ok {
			return nil, malformed()
		}
		if err := checkKey(key, offset); err != nil {
			return nil, err
		}
		if _, dup := values[key]; dup {
			return nil, fmt.Errorf("bootstrap file: duplicate key %q", key)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, malformed()
		}
		values[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, malformed()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("bootstrap file: data after the JSON object near byte %d", dec.InputOffset())
	}
	return values, nil
}

// checkKey accepts exactly the known keys. A key that matches one only
// without regard to case is named by the key it aliases; any other unknown
// key is reported by position alone, since it is file content.
func checkKey(key string, offset int64) error {
	for _, k := range knownKeys {
		if key == k {
			return nil
		}
	}
	for _, k := range knownKeys {
		if strings.EqualFold(key, k) {
			return fmt.Errorf("bootstrap file: key near byte %d differs from %q only in case", offset, k)
		}
	}
	return fmt.Errorf("bootstrap file: unknown key near byte %d", offset)
}

// isJSONInteger reports whether raw is a JSON number without fraction or
// exponent.
func isJSONInteger(raw json.RawMessage) bool {
	s := raw
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// CheckMode accepts the permission bits of a bootstrap file: a regular
// file readable and writable by its owner alone (0600 or stricter, no
// setuid, setgid or sticky bit).
func CheckMode(mode fs.FileMode) error {
	if !mode.IsRegular() {
		return fmt.Errorf("bootstrap file: not a regular file")
	}
	if mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || mode.Perm()&^0o600 != 0 {
		return fmt.Errorf("bootstrap file: mode %#o is too open; want 0600 or stricter", mode.Perm())
	}
	return nil
}

// ReadFile opens the bootstrap file at path, checks the mode of what it
// opened (so a file swapped between a check and the read is not trusted),
// reads at most MaxFileBytes and decodes it with Decode.
func ReadFile(path string) (File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("bootstrap file: %w", err)
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return File{}, fmt.Errorf("bootstrap file: %w", err)
	}
	if err := CheckMode(info.Mode()); err != nil {
		return File{}, err
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return File{}, fmt.Errorf("bootstrap file: read: %w", err)
	}
	return Decode(data)
}
