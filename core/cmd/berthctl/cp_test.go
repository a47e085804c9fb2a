package main

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"berth.dev/runtimebootstrap/filexfer"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

// TestCpTarRoundTrip: a tree written by writeTar under its directory's
// name and applied by extract is the same tree, links kept as links.
func TestCpTarRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "a", "b", "f.txt"), []byte("hello"), 0o640))
	must(t, os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Symlink("a/b/f.txt", filepath.Join(src, "link")))
	must(t, os.Link(filepath.Join(src, "run.sh"), filepath.Join(src, "hard")))

	var buf bytes.Buffer
	var done atomic.Int64
	stats, err := writeTar(&buf, filexfer.ReaderConfig{Root: src, Path: "."}, src, "proj", &done)
	if err != nil || stats.Files != 2 || stats.Hardlinks != 1 || stats.Symlinks != 1 || done.Load() != 15 {
		t.Fatalf("writeTar: %+v %v (done %d)", stats, err, done.Load())
	}
	dst := filepath.Join(t.TempDir(), "out")
	got, err := extract(&buf, dst, cpFlags{requestID: "op-1"}, nil)
	if err != nil || got.Files != 2 || got.Dirs != 3 || got.Symlinks != 1 || got.Hardlinks != 1 {
		t.Fatalf("extract: %+v %v", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "proj", "a", "b", "f.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("f.txt: %q %v", b, err)
	}
	if info, err := os.Stat(filepath.Join(dst, "proj", "run.sh")); err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh: %v %v", info, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "proj", "link")); err != nil || l != "a/b/f.txt" {
		t.Fatalf("link: %q %v", l, err)
	}
}

// TestCpExtractRefusesEscapes: an archive from a Runtime that tries to
// leave the local directory is refused with filexfer's fixed reason, and
// nothing is written outside.
func TestCpExtractRefusesEscapes(t *testing.T) {
	for reason, h := range map[string]tar.Header{
		filexfer.ReasonPathEscapes:    {Name: "../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644},
		filexfer.ReasonPathAbsolute:   {Name: "/tmp/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644},
		filexfer.ReasonSymlinkEscapes: {Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/workspace/x"},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		must(t, tw.WriteHeader(&h))
		if h.Size > 0 {
			_, _ = tw.Write([]byte("x"))
		}
		must(t, tw.Close())
		parent := t.TempDir()
		_, err := extract(&buf, filepath.Join(parent, "out"), cpFlags{requestID: "op-2"}, nil)
		if got := adminclient.Reason(err); got != reason {
			t.Errorf("%s: %v, want %s", h.Name, err, reason)
		}
		if entries, _ := os.ReadDir(parent); len(entries) != 1 {
			t.Errorf("%s: written beside the destination: %v", h.Name, entries)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
