package filexfer

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// step is one call on a Writer: Begin(e) and Write(data), or, with
// writeOnly, Write(data) alone.
type step struct {
	e         Entry
	data      string
	writeOnly bool
}

func file(name, data string) step {
	return step{e: Entry{Name: name, Kind: KindFile, Mode: 0o644, Size: int64(len(data))}, data: data}
}

func dir(name string) step { return step{e: Entry{Name: name, Kind: KindDir, Mode: 0o755}} }

func symlink(name, target string) step {
	return step{e: Entry{Name: name, Kind: KindSymlink, Link: target}}
}

func hardlink(name, target string) step {
	return step{e: Entry{Name: name, Kind: KindHardlink, Link: target}}
}

// fromTar maps a tar header, failing the test on a refusal.
func fromTar(t testing.TB, h *tar.Header) Entry {
	t.Helper()
	e, err := FromTarHeader(h)
	if err != nil {
		t.Fatalf("FromTarHeader(%q): %v", h.Name, err)
	}
	return e
}

// apply runs steps on w and commits; it returns the first error.
func apply(w *Writer, steps []step) error {
	for _, s := range steps {
		if !s.writeOnly {
			if err := w.Begin(s.e); err != nil {
				return err
			}
		}
		if s.writeOnly || s.e.Kind == KindFile {
			if _, err := w.Write([]byte(s.data)); err != nil {
				return err
			}
		}
	}
	return w.Commit()
}

func TestWriterRefusesTheHostileCorpus(t *testing.T) {
	long := strings.Repeat("a/", 2048) + "b" // 4097 bytes
	tb := int64(1) << 40
	cases := []struct {
		name   string
		setup  func(t *testing.T, s sandbox)
		cfg    func(c *WriterConfig)
		steps  []step
		reason string
		entry  int64
		// newWriter: the refusal comes from NewWriter (the destination).
		newWriter bool
		// noTempAtRefusal: no temporary file exists at the refusal, before
		// Close.
		noTempAtRefusal bool
	}{
		{name: "zip slip", steps: []step{file("../../etc/x", "x")}, reason: ReasonPathEscapes},
		{name: "dotdot inside then out", steps: []step{file("ok", "1"), file("a/../../x", "x")}, reason: ReasonPathEscapes, entry: 1},
		{name: "dotdot that stays inside", steps: []step{file("a/../x", "x")}, reason: ReasonPathEscapes},
		{name: "absolute name", steps: []step{file("/etc/passwd", "x")}, reason: ReasonPathAbsolute},
		{name: "symlink to root then write through", steps: []step{symlink("l", "/"), file("l/x", "x")}, reason: ReasonSymlinkEscapes},
		{name: "symlink up then write through", steps: []step{symlink("l", "../.."), file("l/x", "x")}, reason: ReasonSymlinkEscapes},
		{name: "nested symlink up", steps: []step{dir("a"), symlink("a/l", "../../outside")}, reason: ReasonSymlinkEscapes, entry: 1},
		{name: "absolute symlink outside the workspace path", steps: []step{symlink("l", "/etc/passwd")}, reason: ReasonSymlinkEscapes},
		{name: "absolute symlink prefix trick", steps: []step{symlink("l", "/workspace-other/x")}, reason: ReasonSymlinkEscapes},
		{name: "empty symlink target", steps: []step{symlink("l", "")}, reason: ReasonInvalidArchive},
		{
			name: "existing absolute symlink out, entry under it",
			setup: func(t *testing.T, s sandbox) {
				mustSymlink(t, s.outside, filepath.Join(s.root, "out"))
			},
			steps: []step{file("out/x", "x")}, reason: ReasonPathEscapes,
		},
		{
			name: "existing relative symlink out, nested entry under it",
			setup: func(t *testing.T, s sandbox) {
				mustSymlink(t, "../outside", filepath.Join(s.root, "out"))
			},
			steps: []step{file("out/dir/new/x", "x")}, reason: ReasonPathEscapes,
		},
		{
			name: "existing symlink out, overwrite its target file",
			setup: func(t *testing.T, s sandbox) {
				mustSymlink(t, "../outside", filepath.Join(s.root, "out"))
			},
			steps: []step{file("out/secret", "pwned")}, reason: ReasonPathEscapes,
		},
		{
			name: "destination through a symlink out",
			setup: func(t *testing.T, s sandbox) {
				mustSymlink(t, s.outside, filepath.Join(s.root, "out"))
			},
			cfg:    func(c *WriterConfig) { c.Dest = "out/new" },
			reason: ReasonPathEscapes, entry: -1, newWriter: true,
		},
		{
			name:   "destination is a file",
			setup:  func(t *testing.T, s sandbox) { mustWrite(t, filepath.Join(s.root, "f"), "f") },
			cfg:    func(c *WriterConfig) { c.Dest = "f" },
			reason: ReasonTypeConflict, entry: -1, newWriter: true,
		},
		{name: "hardlink to an absolute path", steps: []step{hardlink("h", "/etc/passwd")}, reason: ReasonHardlinkOutside},
		{name: "hardlink up", steps: []step{hardlink("h", "../outside/secret")}, reason: ReasonHardlinkOutside},
		{name: "hardlink to a name not in the archive", steps: []step{hardlink("h", "nothere")}, reason: ReasonHardlinkOutside},
		{
			name:  "hardlink to an existing file not in the archive",
			setup: func(t *testing.T, s sandbox) { mustWrite(t, filepath.Join(s.root, "old"), "old") },
			steps: []step{hardlink("h", "old")}, reason: ReasonHardlinkOutside,
		},
		{name: "hardlink to a directory entry", steps: []step{dir("d"), hardlink("h", "d")}, reason: ReasonHardlinkOutside, entry: 1},
		{
			name:   "one terabyte sparse header",
			cfg:    func(c *WriterConfig) { c.Limits.MaxFileBytes = 1 << 20 },
			steps:  []step{{e: Entry{Name: "sparse", Kind: KindFile, Size: tb}}},
			reason: ReasonFileTooLarge, noTempAtRefusal: true,
		},
		{name: "duplicate name", steps: []step{file("a", "1"), file("./a", "2")}, reason: ReasonDuplicateEntry, entry: 1},
		{name: "duplicate dir and file", steps: []step{dir("a"), file("a/", "2")}, reason: ReasonInvalidArchive, entry: 1},
		{name: "duplicate spelled with slashes", steps: []step{file("a/b", "1"), file("a//b", "2")}, reason: ReasonDuplicateEntry, entry: 1},
		{
			name:  "file over an existing directory",
			setup: func(t *testing.T, s sandbox) { mustMkdir(t, filepath.Join(s.root, "d")) },
			steps: []step{file("d", "x")}, reason: ReasonTypeConflict,
		},
		{
			name:  "dir over an existing file",
			setup: func(t *testing.T, s sandbox) { mustWrite(t, filepath.Join(s.root, "f"), "f") },
			steps: []step{dir("f")}, reason: ReasonTypeConflict,
		},
		{
			name:  "dir over an existing symlink",
			setup: func(t *testing.T, s sandbox) { mustSymlink(t, s.outside, filepath.Join(s.root, "s")) },
			steps: []step{dir("s")}, reason: ReasonTypeConflict,
		},
		{
			name:  "entry under an existing file",
			setup: func(t *testing.T, s sandbox) { mustWrite(t, filepath.Join(s.root, "f"), "f") },
			steps: []step{file("f/x", "x")}, reason: ReasonTypeConflict,
		},
		{name: "entry under a file of the archive", steps: []step{file("g", "g"), file("g/x", "x")}, reason: ReasonTypeConflict, entry: 1},
		{name: "symlink over a file's directory", steps: []step{dir("d"), symlink("d", "x")}, reason: ReasonDuplicateEntry, entry: 1},
		{
			name:  "no overwrite",
			setup: func(t *testing.T, s sandbox) { mustWrite(t, filepath.Join(s.root, "f"), "old") },
			cfg:   func(c *WriterConfig) { c.NoOverwrite = true },
			steps: []step{file("f", "new")}, reason: ReasonFileExists,
		},
		{
			name:  "no overwrite of a symlink",
			setup: func(t *testing.T, s sandbox) { mustSymlink(t, s.outside, filepath.Join(s.root, "s")) },
			cfg:   func(c *WriterConfig) { c.NoOverwrite = true },
			steps: []step{symlink("s", "x")}, reason: ReasonFileExists,
		},
		{name: "path over 4096 bytes", steps: []step{file(long, "x")}, reason: ReasonPathTooLong},
		{name: "component over 255 bytes", steps: []step{file(strings.Repeat("c", 256), "x")}, reason: ReasonPathTooLong},
		{name: "NUL in name", steps: []step{file("a\x00b", "x")}, reason: ReasonPathTooLong},
		{name: "invalid UTF-8", steps: []step{file("a\xffb", "x")}, reason: ReasonPathTooLong},
		{name: "empty name", steps: []step{file("", "x")}, reason: ReasonInvalidArchive},
		{name: "dot name", steps: []step{dir(".")}, reason: ReasonInvalidArchive},
		{name: "data beyond size", steps: []step{{e: Entry{Name: "f", Kind: KindFile, Size: 3}, data: "12345"}}, reason: ReasonInvalidArchive},
		{name: "data short of size", steps: []step{{e: Entry{Name: "f", Kind: KindFile, Size: 5}, data: "123"}}, reason: ReasonInvalidArchive},
		{name: "short file then next entry", steps: []step{{e: Entry{Name: "f", Kind: KindFile, Size: 5}, data: "123"}, file("g", "g")}, reason: ReasonInvalidArchive},
		{name: "data before any entry", steps: []step{{data: "x", writeOnly: true}}, reason: ReasonInvalidArchive, entry: -1},
		{name: "data after a dir", steps: []step{dir("d"), {data: "x", writeOnly: true}}, reason: ReasonInvalidArchive},
		{name: "negative size", steps: []step{{e: Entry{Name: "f", Kind: KindFile, Size: -1}}}, reason: ReasonInvalidArchive},
		{name: "size on a dir", steps: []step{{e: Entry{Name: "d", Kind: KindDir, Size: 4}}}, reason: ReasonInvalidArchive},
		{name: "no kind", steps: []step{{e: Entry{Name: "f"}}}, reason: ReasonInvalidArchive},
		{name: "unknown kind", steps: []step{{e: Entry{Name: "f", Kind: 9}}}, reason: ReasonInvalidArchive},
		{
			name:   "upload over the total",
			cfg:    func(c *WriterConfig) { c.Limits.MaxBytes = 10 },
			steps:  []step{file("a", "123456"), file("b", "123456")},
			reason: ReasonUploadTooLarge, entry: 1,
		},
		{
			name:   "too many entries",
			cfg:    func(c *WriterConfig) { c.Limits.MaxEntries = 2 },
			steps:  []step{dir("a"), dir("b"), dir("c")},
			reason: ReasonTooManyEntries, entry: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			if tc.setup != nil {
				tc.setup(t, s)
			}
			before := s.outsideHash(t)
			cfg := WriterConfig{Root: s.root, OpID: "op-1"}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			w, err := NewWriter(cfg)
			if err == nil {
				err = apply(w, tc.steps)
				if tc.noTempAtRefusal && len(s.temps(t)) != 0 {
					t.Errorf("temporary files at the refusal: %v", s.temps(t))
				}
				if cerr := w.Close(); cerr != nil {
					t.Errorf("Close: %v", cerr)
				}
				if tc.newWriter {
					t.Fatal("NewWriter accepted the destination")
				}
			} else if !tc.newWriter {
				t.Fatalf("NewWriter: %v", err)
			}
			var r *Refusal
			if !errors.As(err, &r) || r.Reason != tc.reason || r.Entry != tc.entry {
				t.Fatalf("got %v (%#v), want %s at entry %d", err, r, tc.reason, tc.entry)
			}
			if msg := err.Error(); msg != "file refused: "+tc.reason {
				t.Errorf("error text %q", msg)
			}
			if got := s.outsideHash(t); got != before {
				t.Error("something outside the root changed")
			}
			if left := s.temps(t); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func TestFromTarHeaderRefusesSpecialTypes(t *testing.T) {
	for _, tc := range []struct {
		h      tar.Header
		reason string
	}{
		{tar.Header{Name: "dev", Typeflag: tar.TypeChar}, ReasonFileTypeRefused},
		{tar.Header{Name: "blk", Typeflag: tar.TypeBlock}, ReasonFileTypeRefused},
		{tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}, ReasonFileTypeRefused},
		{tar.Header{Name: "g", Typeflag: tar.TypeXGlobalHeader}, ReasonFileTypeRefused},
		{tar.Header{Name: "q", Typeflag: 'Q'}, ReasonFileTypeRefused},
		{tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg}, ReasonPathAbsolute},
		{tar.Header{Name: "../../etc/x", Typeflag: tar.TypeReg}, ReasonPathEscapes},
		{tar.Header{Name: "f/", Typeflag: tar.TypeReg}, ReasonInvalidArchive},
		{tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: -1}, ReasonInvalidArchive},
	} {
		if _, err := FromTarHeader(&tc.h); !hasReason(err, tc.reason) {
			t.Errorf("%q %q: %v, want %s", tc.h.Name, tc.h.Typeflag, err, tc.reason)
		}
	}
	// A sparse entry counts with its logical size, and a Writer refuses it
	// from the header.
	e := fromTar(t, &tar.Header{Name: "sparse", Typeflag: tar.TypeGNUSparse, Size: 1 << 40, Mode: 0o4755})
	if e.Kind != KindFile || e.Size != 1<<40 || e.Mode != 0o755|os.ModeSetuid {
		t.Fatalf("sparse entry %+v", e)
	}
	d := fromTar(t, &tar.Header{Name: "./a//b/", Typeflag: tar.TypeDir, Mode: 0o40755})
	if d.Kind != KindDir || d.Name != "a/b" || d.Mode != 0o755 {
		t.Fatalf("dir entry %+v", d)
	}
}

func TestTarHeaderRoundTrip(t *testing.T) {
	mt := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	entries := []Entry{
		{Name: "d", Kind: KindDir, Mode: 0o750, ModTime: mt},
		{Name: "d/f", Kind: KindFile, Mode: 0o644 | os.ModeSetgid, ModTime: mt, Size: 3},
		{Name: "d/l", Kind: KindSymlink, Mode: 0o777, ModTime: mt, Link: "../x"},
		{Name: "h", Kind: KindHardlink, Mode: 0o644, ModTime: mt, Link: "d/f"},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(TarHeader(e)); err != nil {
			t.Fatal(err)
		}
		if e.Kind == KindFile {
			_, _ = tw.Write([]byte("abc"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	for _, want := range entries {
		h, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || (want.Kind == KindDir) != strings.HasSuffix(h.Name, "/") {
			t.Errorf("header %+v", h)
		}
		got := fromTar(t, h)
		if got.Name != want.Name || got.Kind != want.Kind || got.Mode != want.Mode || !got.ModTime.Equal(want.ModTime) ||
			got.Size != want.Size || got.Link != want.Link {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
}

func TestWriterReplacesWithoutFollowing(t *testing.T) {
	s := newSandbox(t)
	mustSymlink(t, filepath.Join(s.outside, "secret"), filepath.Join(s.root, "s"))
	mustMkdir(t, filepath.Join(s.root, "d"))
	mustWrite(t, filepath.Join(s.root, "old"), "old")
	before := s.outsideHash(t)
	w, err := NewWriter(WriterConfig{Root: s.root, OpID: "op", Dest: "new/dest"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := apply(w, nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w, err = NewWriter(WriterConfig{Root: s.root, OpID: "op"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// A file over a symlink replaces the link; a dir over a dir is
	// applied; a file over a file is replaced.
	if err := apply(w, []step{file("s", "mine"), {e: Entry{Name: "d", Kind: KindDir, Mode: 0o700}}, file("old", "new")}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(s.root, "s")); got != "mine" {
		t.Fatalf("s = %q", got)
	}
	if info, _ := os.Lstat(filepath.Join(s.root, "d")); info.Mode().Perm() != 0o700 {
		t.Fatalf("d mode %v", info.Mode())
	}
	if got := readFile(t, filepath.Join(s.root, "old")); got != "new" {
		t.Fatalf("old = %q", got)
	}
	if info, err := os.Stat(filepath.Join(s.root, "new", "dest")); err != nil || !info.IsDir() {
		t.Fatalf("destination not created: %v", err)
	}
	if s.outsideHash(t) != before {
		t.Fatal("something outside the root changed")
	}
}

func TestJournalAndSweep(t *testing.T) {
	s := newSandbox(t)
	journals := t.TempDir()
	mustWrite(t, filepath.Join(s.root, "keep"), "keep")
	mustWrite(t, filepath.Join(s.outside, TempPrefix+"x"), "outside")
	before := s.outsideHash(t)
	w, err := NewWriter(WriterConfig{Root: s.root, OpID: "crashed", JournalDir: journals, Dest: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Begin(Entry{Name: "half", Kind: KindFile, Mode: 0o644, Size: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("12345")); err != nil {
		t.Fatal(err)
	}
	// The process dies here: no Close. A hostile journal names files that
	// are not temporaries.
	if len(s.temps(t)) != 1 {
		t.Fatalf("temporary files %v", s.temps(t))
	}
	// Journals list directories; a hostile one names the outside, an
	// absolute path and a plain file, and a temporary of another operation
	// in a listed directory stays.
	mustWrite(t, filepath.Join(s.root, "d", TempPrefix+"other-op-1"), "not this operation's")
	mustWrite(t, filepath.Join(journals, "other"), "keep\n../outside\n/etc\n..\n")
	removed, err := Sweep(s.root, journals)
	if err != nil || removed != 1 {
		t.Fatalf("Sweep: %d, %v", removed, err)
	}
	if left := s.temps(t); len(left) != 1 || !strings.HasSuffix(left[0], TempPrefix+"other-op-1") {
		t.Fatalf("temporary files left: %v, want only the other operation's", left)
	}
	if entries, _ := os.ReadDir(journals); len(entries) != 0 {
		t.Fatalf("journals left: %v", entries)
	}
	if readFile(t, filepath.Join(s.root, "keep")) != "keep" || s.outsideHash(t) != before {
		t.Fatal("sweep removed what it must not")
	}
	if n, err := Sweep(s.root, filepath.Join(s.base, "missing")); n != 0 || err != nil {
		t.Fatalf("Sweep of a missing dir: %d, %v", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close after a sweep: %v", err)
	}
}

func TestCloseRemovesTheTemporaryFileAndJournal(t *testing.T) {
	s := newSandbox(t)
	journals := filepath.Join(s.base, "journals")
	mustMkdir(t, journals)
	w, err := NewWriter(WriterConfig{Root: s.root, OpID: "op", JournalDir: journals})
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(w, []step{file("done", "done")}); err != nil {
		t.Fatal(err)
	}
	_ = w.Begin(Entry{Name: "half", Kind: KindFile, Size: 4})
	_, _ = w.Write([]byte("ab"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if left := s.temps(t); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if entries, _ := os.ReadDir(journals); len(entries) != 0 {
		t.Fatalf("journal left: %v", entries)
	}
	if readFile(t, filepath.Join(s.root, "done")) != "done" {
		t.Fatal("a renamed file went")
	}
	if _, err := os.Stat(filepath.Join(s.root, "half")); err == nil {
		t.Fatal("an unfinished file reached its name")
	}
}

func TestResolvePath(t *testing.T) {
	for _, tc := range []struct {
		p, want, reason string
	}{
		{p: "", want: "."},
		{p: ".", want: "."},
		{p: "/workspace", want: "."},
		{p: "/workspace/", want: "."},
		{p: "/workspace/a/b", want: "a/b"},
		{p: "a/../b", want: "b"},
		{p: "a/./b/", want: "a/b"},
		{p: "/workspace/../etc", reason: ReasonPathAbsolute},
		{p: "/workspacex/a", reason: ReasonPathAbsolute},
		{p: "/etc/passwd", reason: ReasonPathAbsolute},
		{p: "..", reason: ReasonPathEscapes},
		{p: "a/../../b", reason: ReasonPathEscapes},
		{p: "a\x00", reason: ReasonPathTooLong},
		{p: strings.Repeat("c", 256), reason: ReasonPathTooLong},
	} {
		got, err := ResolvePath("", tc.p)
		if tc.reason != "" {
			if !hasReason(err, tc.reason) {
				t.Errorf("ResolvePath(%q) = %q, %v; want %s", tc.p, got, err, tc.reason)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q", tc.p, got, err, tc.want)
		}
	}
}

func hasReason(err error, reason string) bool {
	got, ok := ReasonOf(err)
	return ok && got == reason
}

func mustSymlink(t testing.TB, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t testing.TB, name string) {
	t.Helper()
	if err := os.Mkdir(name, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t testing.TB, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
