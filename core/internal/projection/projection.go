package projection

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"berth.dev/sandbox/providers"
)

// Main runs a projection command named name over args: generate renders
// the projection of the default registry, path is where it is committed
// (relative to the repository root, the working directory of `go run`).
// It returns the exit code: 0 written or fresh, 1 stale or failed, 2
// usage.
func Main(name, path string, generate func(*providers.Registry) ([]byte, error), args []string, stderr io.Writer) int {
	flags := flag.NewFlagSet(name, flag.ContinueOnError)
	flags.SetOutput(stderr)
	write := flags.Bool("write", false, "write "+path+" instead of checking that it is fresh")
	out := flags.String("out", path, "the projection's file")
	if err := flags.Parse(args); err != nil || flags.NArg() != 0 {
		return 2
	}
	reg, err := providers.Default()
	if err != nil {
		fmt.Fprintf(stderr, "%s: provider registry: %v\n", name, err)
		return 1
	}
	want, err := generate(reg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if *write {
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		if err := os.WriteFile(*out, want, 0o644); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		return 0
	}
	got, err := os.ReadFile(*out)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !bytes.Equal(got, want) {
		fmt.Fprintf(stderr, "%s: %s is stale: run go run ./core/cmd/%s -write\n", name, *out, name)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}
