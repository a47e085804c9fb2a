package filexfer

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

// walked is one entry Walk reported, with its bytes.
type walked struct {
	e    Entry
	data string
}

func walkAll(t *testing.T, cfg ReaderConfig) ([]walked, Stats) {
	t.Helper()
	var got []walked
	st, err := Walk(cfg, func(e Entry, r io.Reader) error {
		w := walked{e: e}
		if r != nil {
			data, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			w.data = string(data)
		}
		got = append(got, w)
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return got, st
}

func TestRoundTrip(t *testing.T) {
	s := newSandbox(t)
	mt := func(i int) time.Time { return time.Date(2023, 1, 2, 3, 4, i, 5000, time.UTC) }
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(rand.IntN(256))
	}
	fileAt := func(name string, mode os.FileMode, i int, data string) step {
		return step{e: Entry{Name: name, Kind: KindFile, Mode: mode, ModTime: mt(i), Size: int64(len(data))}, data: data}
	}
	dirAt := func(name string, mode os.FileMode, i int) step {
		return step{e: Entry{Name: name, Kind: KindDir, Mode: mode, ModTime: mt(i)}}
	}
	steps := []step{
		dirAt("d", 0o750, 1),
		dirAt("d/e", 0o755, 2),
		dirAt("d/e/f", 0o700, 3),
		fileAt("d/e/f/big", 0o644, 4, string(big)),
		fileAt("d/exec.sh", 0o755, 5, "#!/bin/sh\necho hi\n"),
		fileAt("d/secret", 0o600, 6, "secret"),
		symlink("d/rel", "../empty"),
		fileAt("empty", 0o644, 7, ""),
		symlink("abs", "/workspace/d/exec.sh"),
		hardlink("hl", "d/exec.sh"),
		fileAt("suid", 0o755|os.ModeSetuid|os.ModeSticky, 8, "s"),
	}
	w, err := NewWriter(WriterConfig{Root: s.root, OpID: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	// Write big in chunks, the way the wire delivers it.
	for _, st := range steps {
		if err := w.Begin(st.e); err != nil {
			t.Fatalf("Begin(%s): %v", st.e.Name, err)
		}
		for data := st.data; data != ""; {
			n := min(len(data), 1<<20)
			if _, err := w.Write([]byte(data[:n])); err != nil {
				t.Fatal(err)
			}
			data = data[n:]
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	ws := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := Stats{Files: 5, Dirs: 3, Symlinks: 2, Hardlinks: 1, Bytes: int64(len(big)) + 18 + 6 + 1, ModesMasked: 1, Entries: 11}
	if ws != want {
		t.Fatalf("writer stats %+v, want %+v", ws, want)
	}

	got, rs := walkAll(t, ReaderConfig{Root: s.root, Path: "."})
	order := []string{"abs", "d", "d/e", "d/e/f", "d/e/f/big", "d/exec.sh", "d/rel", "d/secret", "empty", "hl", "suid"}
	if len(got) != len(order) {
		t.Fatalf("walked %d entries, want %d", len(got), len(order))
	}
	byName := map[string]step{}
	for _, st := range steps {
		byName[st.e.Name] = st
	}
	for i, g := range got {
		if g.e.Name != order[i] {
			t.Fatalf("entry %d is %q, want %q", i, g.e.Name, order[i])
		}
		w := byName[g.e.Name].e
		if g.e.Kind != w.Kind || g.e.Link != w.Link || g.e.Size != w.Size || g.data != byName[g.e.Name].data {
			t.Errorf("%s: got %+v (%d bytes), want %+v", g.e.Name, g.e, len(g.data), w)
		}
		if w.Kind == KindFile || w.Kind == KindDir {
			if g.e.Mode != w.Mode&os.ModePerm || !g.e.ModTime.Equal(w.ModTime) {
				t.Errorf("%s: mode %v time %v, want %v %v", g.e.Name, g.e.Mode, g.e.ModTime, w.Mode&os.ModePerm, w.ModTime)
			}
		}
	}
	want.ModesMasked = 0
	if rs != want {
		t.Fatalf("walk stats %+v, want %+v", rs, want)
	}
	ms, err := Measure(ReaderConfig{Root: s.root, Path: "."})
	if err != nil || ms != want {
		t.Fatalf("Measure %+v, %v; want %+v", ms, err, want)
	}

	// A sub-directory's names are relative to it; a file is one entry.
	sub, _ := walkAll(t, ReaderConfig{Root: s.root, Path: "d/e"})
	if len(sub) != 2 || sub[0].e.Name != "f" || sub[1].e.Name != "f/big" {
		t.Fatalf("walk of d/e: %+v", sub)
	}
	one, _ := walkAll(t, ReaderConfig{Root: s.root, Path: "d/secret"})
	if len(one) != 1 || one[0].e.Name != "secret" || one[0].data != "secret" {
		t.Fatalf("walk of a file: %+v", one)
	}
}

func TestWalkSkipsSpecialFilesAndRefuses(t *testing.T) {
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.root, "a"), "12345")
	mustWrite(t, filepath.Join(s.root, "b"), "12345")
	if err := syscall.Mkfifo(filepath.Join(s.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, s.outside, filepath.Join(s.root, "out"))
	got, st := walkAll(t, ReaderConfig{Root: s.root})
	if len(got) != 3 || st.Skipped != 1 || got[2].e.Kind != KindSymlink || got[2].e.Link != s.outside {
		t.Fatalf("walk: %+v %+v", got, st)
	}
	for _, tc := range []struct {
		cfg    ReaderConfig
		reason string
	}{
		{ReaderConfig{Root: s.root, Limits: Limits{MaxEntries: 2}}, ReasonTooManyEntries},
		{ReaderConfig{Root: s.root, Limits: Limits{MaxBytes: 9}}, ReasonDownloadTooLarge},
		{ReaderConfig{Root: s.root, Limits: Limits{MaxFileBytes: 4}}, ReasonFileTooLarge},
		{ReaderConfig{Root: s.root, Path: "missing"}, ReasonNotFound},
		{ReaderConfig{Root: s.root, Path: "out/secret"}, ReasonPathEscapes},
		{ReaderConfig{Root: s.root, Path: "../outside"}, ReasonPathEscapes},
	} {
		if _, err := Measure(tc.cfg); !hasReason(err, tc.reason) {
			t.Errorf("Measure(%+v): %v, want %s", tc.cfg, err, tc.reason)
		}
	}
}

func TestExactReader(t *testing.T) {
	for _, tc := range []struct {
		src  string
		size int64
		want string
	}{
		{"abc", 5, "abc\x00\x00"},
		{"abcdef", 3, "abc"},
		{"abc", 3, "abc"},
		{"", 2, "\x00\x00"},
	} {
		got, err := io.ReadAll(&exactReader{r: iotest.OneByteReader(strings.NewReader(tc.src)), left: tc.size})
		if err != nil || !bytes.Equal(got, []byte(tc.want)) {
			t.Errorf("%q as %d: %q, %v", tc.src, tc.size, got, err)
		}
	}
}
