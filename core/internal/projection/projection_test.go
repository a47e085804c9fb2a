package projection

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/sandbox/providers"
)

// TestMainWritesAndChecksFreshness: -write writes the projection; the
// check passes on that file and fails, saying how to fix it, on a missing
// or changed one.
func TestMainWritesAndChecksFreshness(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p", "artifacts.json")
	var stderr bytes.Buffer
	run := func(args ...string) int {
		stderr.Reset()
		return Main("provider-artifacts", path, providers.ArtifactCatalog, args, &stderr)
	}
	if code := run(); code != 1 || !strings.Contains(stderr.String(), "-write") {
		t.Fatalf("check of a missing file: %d %q", code, stderr.String())
	}
	if code := run("-write"); code != 0 {
		t.Fatalf("-write: %d %q", code, stderr.String())
	}
	if code := run(); code != 0 {
		t.Fatalf("check of a fresh file: %d %q", code, stderr.String())
	}
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run(); code != 1 || !strings.Contains(stderr.String(), "stale") {
		t.Fatalf("check of a changed file: %d %q", code, stderr.String())
	}
	if code := run("extra"); code != 2 {
		t.Fatalf("an argument: %d", code)
	}
}
