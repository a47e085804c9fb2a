package microsandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/sandbox/microsandbox"
)

// TestExecBoundsOutput: the runner keeps only Limit bytes of each stream,
// says so, counts every byte and keeps stderr's tail, however the child
// writes.
func TestExecBoundsOutput(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "msb")
	body := "#!/bin/sh\nhead -c 100000 /dev/zero | tr '\\0' o\nhead -c 100000 /dev/zero | tr '\\0' e >&2\nprintf 'the end' >&2\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := microsandbox.Exec{Path: script, Home: dir}.Run(context.Background(), microsandbox.Invocation{Limit: 1000})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run = %v, exit %d", err, res.ExitCode)
	}
	if len(res.Stdout) != 1000 || len(res.Stderr) != 1000 || !res.Truncated {
		t.Errorf("kept %d and %d bytes (truncated %v), want 1000 each", len(res.Stdout), len(res.Stderr), res.Truncated)
	}
	if res.StdoutTotal != 100000 || res.StderrTotal != 100007 || !strings.HasSuffix(string(res.StderrTail), "eeethe end") {
		t.Errorf("totals %d, %d, tail %q", res.StdoutTotal, res.StderrTotal, res.StderrTail)
	}
}
