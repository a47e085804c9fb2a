package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	testDevice     = "6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"
	testCredential = "binary-test-credential-0123456789abcdefghijklmnop"
)

func bootstrapJSON(credential string) string {
	return `{"version":1,"core_url":"https://core.example.test","device_id":"` + testDevice +
		`","credential":"` + credential + `"}`
}

// buildBinary builds berth-runtime once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "berth-runtime-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "berth-runtime")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", errors.New("go build: " + err.Error() + "\n" + string(out))
	}
	return bin, nil
})

func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := buildBinary(); err == nil && bin != "" {
		_ = os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

func writeBootstrap(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runtime-bootstrap.json")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("run: %v", err)
	}
	return exit.ExitCode()
}

func TestConnectValidatesAndStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			path := writeBootstrap(t, bootstrapJSON(testCredential), 0o600)
			cmd := exec.Command(binary(t), "connect", "--profile", "default", "--bootstrap-file", path)
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 16)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			var output []string
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("stderr closed before the validation line; exit %v", cmd.Wait())
				}
				output = append(output, line)
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("no validation line within 30s")
			}
			want := "validated the bootstrap for device " + testDevice
			if !strings.Contains(output[0], want) || !strings.Contains(output[0], "Runtime issue") {
				t.Fatalf("first line %q lacks %q", output[0], want)
			}
			// It keeps running until signalled.
			select {
			case line, ok := <-lines:
				t.Fatalf("unexpected output before the signal: %q (open %v)", line, ok)
			case <-time.After(200 * time.Millisecond):
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for line := range lines {
				output = append(output, line)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if code := exitCode(t, err); code != 0 {
					t.Fatalf("exit %d after %v, want 0; output %q", code, sig, output)
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("did not exit within 30s of %v", sig)
			}
			all := strings.Join(output, "\n") + stdout.String()
			if strings.Contains(all, testCredential) {
				t.Fatalf("output carries the credential: %q", all)
			}
		})
	}
}

func TestConnectRejectsInvalidBootstrap(t *testing.T) {
	bin := binary(t)
	cases := map[string]struct {
		content string
		mode    os.FileMode
	}{
		"unknown key":      {strings.Replace(bootstrapJSON(testCredential), `{`, `{"x":"`+testCredential+`",`, 1), 0o600},
		"case alias":       {strings.Replace(bootstrapJSON(testCredential), `"credential"`, `"Credential"`, 1), 0o600},
		"bad device id":    {strings.Replace(bootstrapJSON(testCredential), testDevice, "device-"+testCredential, 1), 0o600},
		"credential space": {bootstrapJSON(testCredential + " x"), 0o600},
		"trailing data":    {bootstrapJSON(testCredential) + testCredential, 0o600},
		"group readable":   {bootstrapJSON(testCredential), 0o640},
		"world readable":   {bootstrapJSON(testCredential), 0o644},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeBootstrap(t, tc.content, tc.mode)
			out, err := exec.Command(bin, "connect", "--profile", "default", "--bootstrap-file", path).CombinedOutput()
			if code := exitCode(t, err); code != 1 {
				t.Fatalf("exit %d, want 1; output %q", code, out)
			}
			if strings.Contains(string(out), testCredential) || strings.Contains(string(out), testCredential[:20]) {
				t.Fatalf("output carries the credential: %q", out)
			}
			if !strings.Contains(string(out), "bootstrap file") {
				t.Fatalf("output does not say what failed: %q", out)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		out, err := exec.Command(bin, "connect", "--bootstrap-file", filepath.Join(t.TempDir(), "none.json")).CombinedOutput()
		if code := exitCode(t, err); code != 1 {
			t.Fatalf("exit %d, want 1; output %q", code, out)
		}
	})
}

func TestUsageAndVersion(t *testing.T) {
	bin := binary(t)
	valid := writeBootstrap(t, bootstrapJSON(testCredential), 0o600)
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"connect", "--no-such-flag"},
		{"connect", "--profile", "other", "--bootstrap-file", valid},
		{"connect", "--bootstrap-file", valid, "extra"},
		{"version", "extra"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if code := exitCode(t, err); code != 2 {
			t.Errorf("%q: exit %d, want 2; output %q", args, code, out)
		}
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "berth-runtime ") || !strings.Contains(string(out), "bootstrap file version 1") {
		t.Fatalf("version output %q", out)
	}
}
