package runtimebootstrap

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const goldenCredential = "golden-credential-0123456789abcdefghijklmnop"

func readGolden(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodeGolden(t *testing.T) {
	f, err := Decode(readGolden(t))
	if err != nil {
		t.Fatalf("golden file rejected: %v", err)
	}
	want := File{
		Version:    1,
		CoreURL:    "https://core.example.test:8443/berth",
		DeviceID:   "6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
		Credential: NewSecret(goldenCredential),
	}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("decoded %+v, want %+v", f, want)
	}
}

func TestDecodeReadsWhatEncodeWrites(t *testing.T) {
	f := validFile()
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatalf("Decode(Encode(f)): %v", err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Fatalf("round trip changed the file: %+v", got)
	}
}

// golden returns the golden file with old replaced by new exactly once.
func golden(t *testing.T, old, new string) string {
	t.Helper()
	s := string(readGolden(t))
	if strings.Count(s, old) != 1 {
		t.Fatalf("golden file holds %q %d times", old, strings.Count(s, old))
	}
	return strings.Replace(s, old, new, 1)
}

func TestDecodeRejects(t *testing.T) {
	credLine := `"credential": "` + goldenCredential + `"`
	cases := []struct {
		name, data, errHas string
	}{
		{"unknown key", golden(t, `"version": 1,`, `"version": 1, "extra": true,`), "unknown key"},
		{"unknown key carrying the credential", golden(t, `"version": 1,`, `"version": 1, "`+goldenCredential+`": 1,`), "unknown key"},
		{"duplicate key", golden(t, credLine, credLine+`, `+credLine), "duplicate key"},
		{"duplicate key with another value", golden(t, `"version": 1,`, `"version": 1, "version": 1,`), "duplicate key"},
		{"case-aliased key alone", golden(t, `"credential"`, `"Credential"`), "only in case"},
		{"case-aliased key beside the exact one", golden(t, credLine, credLine+`, "Credential": "`+goldenCredential+`"`), "only in case"},
		{"upper-case key", golden(t, `"device_id"`, `"DEVICE_ID"`), "only in case"},
		{"trailing object", string(readGolden(t)) + `{}`, "after the JSON object"},
		{"trailing garbage", string(readGolden(t)) + `x` + goldenCredential, "after the JSON object"},
		{"trailing second file", string(readGolden(t)) + string(readGolden(t)), "after the JSON object"},
		{"oversize", golden(t, `"version": 1,`, `"version": 1, "pad": "`+strings.Repeat(" ", MaxFileBytes)+`",`), "larger than"},
		{"missing key", golden(t, `"version": 1,`, ``), "missing key"},
		{"empty", ``, "malformed"},
		{"not an object", `["` + goldenCredential + `"]`, "JSON object"},
		{"null", `null`, "JSON object"},
		{"truncated", strings.TrimSuffix(strings.TrimSpace(string(readGolden(t))), "}"), "malformed"},
		{"syntax error in the credential", golden(t, credLine, `"credential": "`+goldenCredential+`\q"`), "malformed"},
		{"version string", golden(t, `"version": 1`, `"version": "1"`), "version"},
		{"version fraction", golden(t, `"version": 1`, `"version": 1.0`), "version"},
		{"version exponent", golden(t, `"version": 1`, `"version": 1e0`), "version"},
		{"version huge", golden(t, `"version": 1`, `"version": 123456789012345678901234567890`), "version"},
		{"version 2", golden(t, `"version": 1`, `"version": 2`), "version"},
		{"version null", golden(t, `"version": 1`, `"version": null`), "version"},
		{"core_url number", golden(t, `"core_url": "https://core.example.test:8443/berth"`, `"core_url": 5`), "core_url"},
		{"core_url scheme", golden(t, `https://core`, `ftp://core`), "core_url"},
		{"core_url user", golden(t, `https://core`, `https://user:pw@core`), "core_url"},
		{"device_id upper case", golden(t, `6f1c2f5e-3a4b`, `6F1C2F5E-3A4B`), "device_id"},
		{"device_id null", golden(t, `"6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"`, `null`), "device_id"},
		{"credential number", golden(t, `"`+goldenCredential+`"`, `12345678901234567890123456789012345678901234567890`), "credential"},
		{"credential null", golden(t, `"`+goldenCredential+`"`, `null`), "credential"},
		{"credential object", golden(t, `"`+goldenCredential+`"`, `{"v":"`+goldenCredential+`"}`), "credential"},
		{"credential short", golden(t, goldenCredential, "short"), "credential"},
		{"credential with space", golden(t, goldenCredential, goldenCredential+" tail"), "credential"},
		{"credential escaped newline", golden(t, goldenCredential, goldenCredential+`\n`), "credential"},
		{"credential non-ASCII", golden(t, goldenCredential, goldenCredential+`é`), "credential"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.data))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.errHas) {
				t.Errorf("error %q does not mention %q", msg, tc.errHas)
			}
			// No error may carry the credential or a recognisable piece of it.
			if strings.Contains(msg, goldenCredential[:16]) || strings.Contains(msg, goldenCredential[16:]) {
				t.Errorf("error leaks the credential: %q", msg)
			}
		})
	}
}

func TestDecodeAcceptsAnyKeyOrderAndWhitespace(t *testing.T) {
	data := "\n\t{\"credential\":\"" + goldenCredential + "\" ,\"device_id\" : \"6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f\"," +
		"\"core_url\":\"http://core.internal\",\"version\":1}\r\n  "
	if _, err := Decode([]byte(data)); err != nil {
		t.Fatalf("rejected: %v", err)
	}
}

func TestCheckMode(t *testing.T) {
	for _, tc := range []struct {
		mode fs.FileMode
		ok   bool
	}{
		{0o600, true},
		{0o400, true},
		{0o200, true},
		{0o000, true},
		{0o640, false},
		{0o604, false},
		{0o644, false},
		{0o660, false},
		{0o606, false},
		{0o700, false},
		{0o610, false},
		{0o601, false},
		{0o600 | fs.ModeSetuid, false},
		{0o600 | fs.ModeSetgid, false},
		{0o600 | fs.ModeSticky, false},
		{0o600 | fs.ModeDir, false},
		{0o600 | fs.ModeSymlink, false},
		{0o600 | fs.ModeNamedPipe, false},
	} {
		err := CheckMode(tc.mode)
		if (err == nil) != tc.ok {
			t.Errorf("CheckMode(%v) = %v, want ok=%v", tc.mode, err, tc.ok)
		}
	}
}

func writeMode(t *testing.T, data []byte, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runtime-bootstrap.json")
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is filtered by the umask; set it exactly.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadFile(t *testing.T) {
	data := readGolden(t)
	if _, err := ReadFile(writeMode(t, data, 0o600)); err != nil {
		t.Fatalf("0600 file rejected: %v", err)
	}
	if _, err := ReadFile(writeMode(t, data, 0o400)); err != nil {
		t.Fatalf("0400 file rejected: %v", err)
	}
	for _, mode := range []os.FileMode{0o640, 0o644, 0o604} {
		_, err := ReadFile(writeMode(t, data, mode))
		if err == nil || !strings.Contains(err.Error(), "too open") {
			t.Errorf("mode %#o: got %v, want a mode error", mode, err)
		}
	}
	if _, err := ReadFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: got %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
	big := append([]byte(`{"pad":"`), make([]byte, 2*MaxFileBytes)...)
	if _, err := ReadFile(writeMode(t, big, 0o600)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversize file: got %v", err)
	}
}

// TestDecodeGoldenInvalid reads every file in testdata/invalid: each is
// refused, and the error names what is wrong (the file's name says it).
func TestDecodeGoldenInvalid(t *testing.T) {
	want := map[string]string{
		"duplicate_key.json":         "duplicate key",
		"case_aliased_key.json":      "only in case",
		"unknown_key.json":           "unknown key",
		"version_2.json":             "version",
		"core_url_scheme.json":       "core_url",
		"credential_whitespace.json": "credential",
	}
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Fatalf("%d files in testdata/invalid, %d expected", len(files), len(want))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decode(data)
		if err == nil || !strings.Contains(err.Error(), want[filepath.Base(f)]) {
			t.Errorf("%s: %v, want an error about %q", filepath.Base(f), err, want[filepath.Base(f)])
		}
		if err != nil && strings.Contains(err.Error(), "golden") {
			t.Errorf("%s: the error carries the credential: %v", filepath.Base(f), err)
		}
	}
}
