package filexfer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// sandbox is a temp dir holding the workspace root and a sibling that
// must never change.
type sandbox struct {
	base, root, outside string
}

func newSandbox(t testing.TB) sandbox {
	t.Helper()
	base := t.TempDir()
	s := sandbox{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{s.root, s.outside, filepath.Join(s.outside, "dir")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.outside, "dir", "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// outsideHash hashes everything under base but the root: names, types,
// modes, sizes, times, contents and link targets.
func (s sandbox) outsideHash(t testing.TB) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(s.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == s.root {
			return filepath.SkipDir
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d %d", p, info.Mode(), info.Size(), info.ModTime().UnixNano())
		switch {
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += " " + hex.EncodeToString(sum[:])
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

// temps lists the temporary names left under the root.
func (s sandbox) temps(t testing.TB) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), TempPrefix) {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
