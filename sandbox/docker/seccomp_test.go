package docker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/sandbox/docker/internal/seccompprofile"
	"berth.dev/sandbox/errdefs"
)

// The shipped profile and its companions, relative to this package.
const (
	shippedProfile = "../../deploy/runtime/seccomp.json"
	shippedSum     = "../../deploy/runtime/seccomp.json.sha256"
	shippedLicense = "../../deploy/runtime/seccomp.LICENSE"
	sandboxGoMod   = "../go.mod"
)

func readShipped(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func TestShippedSeccompProfileHasTheRecordedDigest(t *testing.T) {
	profile := readShipped(t, shippedProfile)
	if got := seccompprofile.Digest(profile); got != SeccompProfileSHA256 {
		t.Errorf("SHA-256 of %s is %s, SeccompProfileSHA256 is %s", shippedProfile, got, SeccompProfileSHA256)
	}
	want := SeccompProfileSHA256 + "  seccomp.json\n"
	if got := string(readShipped(t, shippedSum)); got != want {
		t.Errorf("%s = %q, want %q", shippedSum, got, want)
	}
}

func TestShippedSeccompProfileIsTheGeneratorOutput(t *testing.T) {
	built, err := seccompprofile.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !bytes.Equal(built, readShipped(t, shippedProfile)) {
		t.Fatalf("%s differs from the generator's output: run 'make generate', commit, and update SeccompProfileSHA256", shippedProfile)
	}
}

func TestShippedSeccompProfileAppendsExactlyOneNamespaceRule(t *testing.T) {
	var p struct {
		DefaultAction string                       `json:"defaultAction"`
		Syscalls      []map[string]json.RawMessage `json:"syscalls"`
	}
	if err := json.Unmarshal(readShipped(t, shippedProfile), &p); err != nil {
		t.Fatalf("parse %s: %v", shippedProfile, err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("defaultAction = %q, want SCMP_ACT_ERRNO", p.DefaultAction)
	}
	if len(p.Syscalls) < 2 {
		t.Fatalf("profile has %d syscall rules", len(p.Syscalls))
	}
	last := p.Syscalls[len(p.Syscalls)-1]
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"action", "names"}) {
		t.Errorf("appended rule has fields %v, want only action and names (no args, includes or excludes)", keys)
	}
	var action string
	var names []string
	if err := json.Unmarshal(last["action"], &action); err != nil || action != "SCMP_ACT_ALLOW" {
		t.Errorf("appended rule action = %s, want SCMP_ACT_ALLOW", last["action"])
	}
	if err := json.Unmarshal(last["names"], &names); err != nil {
		t.Fatalf("appended rule names: %v", err)
	}
	want := []string{"clone", "unshare", "setns", "mount", "umount2", "pivot_root"}
	if !slices.Equal(names, want) {
		t.Errorf("appended rule allows %v, want exactly %v", names, want)
	}
	if !slices.Equal(seccompprofile.AppendedSyscalls(), want) {
		t.Errorf("seccompprofile.AppendedSyscalls() = %v, want %v", seccompprofile.AppendedSyscalls(), want)
	}
}

func TestShippedSeccompLicenseNamesTheUpstreamVersion(t *testing.T) {
	version := requiredVersion(t, seccompprofile.UpstreamModule)
	license := string(readShipped(t, shippedLicense))
	header, body, ok := strings.Cut(license, "\n\n")
	if !ok || header != seccompprofile.LicenseHeader(version) {
		t.Errorf("%s header = %q, want %q", shippedLicense, header, seccompprofile.LicenseHeader(version))
	}
	if !strings.Contains(body, "Apache License") || !strings.Contains(body, "Version 2.0, January 2004") {
		t.Errorf("%s does not carry the Apache-2.0 license text", shippedLicense)
	}
}

// requiredVersion returns the version of module that sandbox/go.mod requires.
func requiredVersion(t *testing.T, module string) string {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(readShipped(t, sandboxGoMod)))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s does not require %s", sandboxGoMod, module)
	return ""
}

func TestLoadSeccompProfileAcceptsTheShippedFile(t *testing.T) {
	b, err := LoadSeccompProfile(shippedProfile)
	if err != nil {
		t.Fatalf("LoadSeccompProfile(shipped): %v", err)
	}
	if !bytes.Equal(b, readShipped(t, shippedProfile)) {
		t.Error("LoadSeccompProfile returned other bytes than the file's")
	}
}

func TestLoadSeccompProfileRejects(t *testing.T) {
	shipped := readShipped(t, shippedProfile)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A marker that must never appear in an error.
	const marker = "SCMP_ACT_LOG_MARKER"
	modified := bytes.Replace(shipped, []byte(`"defaultAction": "SCMP_ACT_ERRNO"`), []byte(`"defaultAction": "`+marker+`"`), 1)
	if bytes.Equal(modified, shipped) {
		t.Fatal("test did not modify the profile")
	}
	oversized := append(bytes.Repeat([]byte(" "), seccompProfileMaxBytes+1-len(shipped)), shipped...)

	cases := []struct {
		name     string
		path     string
		notExist bool
	}{
		{name: "modified copy", path: write("modified.json", modified)},
		{name: "appended byte", path: write("appended.json", append(slices.Clone(shipped), '\n'))},
		{name: "oversized", path: write("oversized.json", oversized)},
		{name: "empty", path: write("empty.json", nil)},
		{name: "missing", path: filepath.Join(dir, "missing.json"), notExist: true},
		{name: "directory", path: dir},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := LoadSeccompProfile(c.path)
			if err == nil {
				t.Fatal("accepted")
			}
			if b != nil {
				t.Error("returned bytes with an error")
			}
			if !errdefs.IsInvalid(err) {
				t.Errorf("error %q is not ErrInvalid", err)
			}
			if f, ok := errdefs.Field(err); !ok || f != "node.seccomp_profile" {
				t.Errorf("error %q names field %q, want node.seccomp_profile", err, f)
			}
			if got := errors.Is(err, fs.ErrNotExist); got != c.notExist {
				t.Errorf("errors.Is(%q, fs.ErrNotExist) = %v, want %v", err, got, c.notExist)
			}
			msg := err.Error()
			if strings.Contains(msg, marker) || strings.Contains(msg, "syscalls") || strings.Contains(msg, dir) || len(msg) > 120 {
				t.Errorf("error is not short and content-free: %q", msg)
			}
		})
	}
}

func TestLoadSeccompProfileChecksTheJSONAfterTheDigest(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"not JSON":            `{"defaultAction": `,
		"no defaultAction":    `{"syscalls": []}`,
		"empty defaultAction": `{"defaultAction": ""}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, "p.json")
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadSeccompProfile(p, seccompprofile.Digest([]byte(content)))
			if !errdefs.IsInvalid(err) {
				t.Fatalf("loadSeccompProfile = %v, want ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "defaultAction\"") || strings.Contains(err.Error(), "syscalls") {
				t.Errorf("error repeats content: %q", err)
			}
		})
	}
}
