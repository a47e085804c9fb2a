package berthctl

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/test/internal/stack"
)

// TestCpCopiesTreesBothWays is `berthctl cp` against a real Core, node
// agent, engine and Runtime: a local tree (nested directories, a 2 MiB
// random file, an executable, a symlink and a hard link) uploaded as a
// directory lands byte-identical with its modes and links, which a Turn
// reads in the container; a file uploads raw into a directory; the tree
// downloads back identical into another directory, to stdout as a tar,
// and one file with --raw; a path out of the workspace is refused with
// its fixed reason; and the progress line is drawn on a terminal only.
func TestCpCopiesTreesBothWays(t *testing.T) {
	host, image, engine := engineOf(t)
	core, cc, ctx, installation := startCore(t, engine)
	stack.EnrollAndStart(t, core, ctx, cc, installation, stack.NodeOptions{
		Socket: strings.TrimPrefix(host, "unix://"), Image: image, Network: "bridge",
	}, "")
	stack.EnableAll(t, ctx, cc)
	stack.CommitDockerDeployment(t, ctx, cc, stack.DefaultSpecification())

	c := newCtl(t, core.AdminToken(t))
	c.ok("login", "--address", core.AdminAddr(), "--token-file", filepath.Join(core.StateDir, "admin-token"))
	session := value(t, c.ok("session", "create", "--wait").stdout, "NAME")

	// The local tree.
	proj := filepath.Join(t.TempDir(), "proj")
	big := make([]byte, 2<<20)
	_, _ = rand.Read(big)
	for name, f := range map[string]struct {
		data []byte
		mode fs.FileMode
	}{
		"src/deep/nested/a.txt": {[]byte("nested\n"), 0o640},
		"big.bin":               {big, 0o600},
		"run.sh":                {[]byte("#!/bin/sh\necho ran\n"), 0o755},
	} {
		p := filepath.Join(proj, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	if err := os.Symlink("src/deep/nested/a.txt", filepath.Join(proj, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(proj, "run.sh"), filepath.Join(proj, "run-hard.sh")); err != nil {
		t.Fatal(err)
	}
	want := localTree(t, proj)

	// Upload: the tree lands at up/proj, as cp -r puts it. Without a
	// terminal no progress is drawn.
	r := c.ok("cp", proj, session+":up")
	if strings.TrimSpace(r.stdout) != fmt.Sprintf("copied to %s:up: 3 files, 4 directories, 1 symlinks, 1 hard links, %d bytes", session, len(big)+7+19) {
		t.Fatalf("cp upload: %v", r)
	}
	if r.stderr != "" {
		t.Fatalf("cp wrote to stderr, which is not a terminal: %q", r.stderr)
	}
	// A file uploads raw with its mode; a path ending in / takes its name.
	c.ok("cp", filepath.Join(proj, "run.sh"), session+":bin/")
	// The container's view, through a Turn.
	sum := sha256.Sum256(big)
	r = c.ok("turn", "run", session, "--shell", `cd /workspace/up/proj && sha256sum big.bin && stat -c '%a %h %n' big.bin run.sh run-hard.sh src/deep/nested/a.txt &&
		readlink link && cat link && ./run.sh && /workspace/bin/run.sh && stat -c '%a' /workspace/bin/run.sh`)
	wantTurn := hex.EncodeToString(sum[:]) + "  big.bin\n600 1 big.bin\n755 2 run.sh\n755 2 run-hard.sh\n640 1 src/deep/nested/a.txt\n" +
		"src/deep/nested/a.txt\nnested\nran\nran\n755\n"
	if r.stdout != wantTurn {
		t.Fatalf("the container after cp:\n%s\nwant:\n%s", r.stdout, wantTurn)
	}

	// A tar from stdin is extracted under the path.
	var stdinTar bytes.Buffer
	tw := tar.NewWriter(&stdinTar)
	if err := tw.WriteHeader(&tar.Header{Name: "piped/note.txt", Typeflag: tar.TypeReg, Mode: 0o604, Size: 6}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte("piped\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if r := c.runEnv(stdinTar.Bytes(), nil, "cp", "-", session+":in"); r.code != 0 ||
		strings.TrimSpace(r.stdout) != "copied to "+session+":in: 1 files, 0 directories, 0 symlinks, 0 hard links, 6 bytes" {
		t.Fatalf("cp from stdin: %v", r)
	}
	if r := c.ok("turn", "run", session, "--shell", "stat -c '%a' /workspace/in/piped/note.txt && cat /workspace/in/piped/note.txt"); r.stdout != "604\npiped\n" {
		t.Fatalf("the file from stdin: %v", r)
	}

	// Download into another directory: the same tree, the hard link a link.
	back := filepath.Join(t.TempDir(), "back")
	r = c.ok("cp", session+":up/proj", back)
	if !strings.HasPrefix(r.stdout, "copied to "+back+": 3 files, 3 directories, 1 symlinks, 1 hard links, ") || r.stderr != "" {
		t.Fatalf("cp download: %v", r)
	}
	if diff := treeDiff(want, localTree(t, back)); diff != "" {
		t.Fatalf("the downloaded tree differs:\n%s", diff)
	}
	a, _ := os.Stat(filepath.Join(back, "run.sh"))
	b, _ := os.Stat(filepath.Join(back, "run-hard.sh"))
	if !os.SameFile(a, b) {
		t.Fatal("the hard link was downloaded as a copy")
	}
	// To stdout as a tar.
	r = c.ok("cp", session+":up/proj", "-")
	names := map[string]bool{}
	tr := tar.NewReader(strings.NewReader(r.stdout))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("cp to stdout is not a tar: %v", err)
		}
		names[h.Name] = true
	}
	if !names["big.bin"] || !names["src/deep/nested/"] || !names["link"] || r.stderr != "" {
		t.Fatalf("cp to stdout: names %v, stderr %q", names, r.stderr)
	}
	// One file with --raw, into a directory by its name.
	rawDir := t.TempDir()
	c.ok("cp", "--raw", session+":/workspace/up/proj/big.bin", rawDir+"/")
	if got, err := os.ReadFile(filepath.Join(rawDir, "big.bin")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("cp --raw: %d bytes, %v", len(got), err)
	}

	// Refusals: out of the workspace (the fixed reason, exit 1), an
	// existing name with --no-overwrite, two local sides (exit 2).
	c.fails(1, "error: path_escapes_workspace: ", "cp", filepath.Join(proj, "run.sh"), session+":../x")
	c.fails(1, "error: file_exists: ", "cp", "--no-overwrite", filepath.Join(proj, "run.sh"), session+":bin/run.sh")
	c.fails(2, "error: cp copies between this machine and a Session: exactly one of SRC and DST", "cp", proj, back)

	// On a terminal the progress line is drawn, and cleared at the end.
	out, term, code := c.runOnTerminal(t, "cp", filepath.Join(proj, "big.bin"), session+":pty.bin")
	if code != 0 || !strings.HasPrefix(out, "copied to ") || !strings.Contains(term, "\r\x1b[K") ||
		!strings.Contains(term, " / 2.0Mi (") || !strings.HasSuffix(term, "\r\x1b[K") {
		t.Fatalf("cp on a terminal: exit %d, stdout %q, terminal %q", code, out, term)
	}
}

// treeEntry is one entry of a local tree: its mode, and a file's
// content hash or a symlink's target.
type treeEntry struct {
	mode fs.FileMode
	data string
}

// localTree reads the tree under root (root itself left out).
func localTree(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	got := map[string]treeEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := treeEntry{mode: info.Mode()}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			e.data, err = os.Readlink(p)
			e.mode = fs.ModeSymlink
		case info.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			sum := sha256.Sum256(b)
			e.data = hex.EncodeToString(sum[:])
		}
		rel, _ := filepath.Rel(root, p)
		got[filepath.ToSlash(rel)] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// treeDiff says how got differs from want, "" when it does not.
func treeDiff(want, got map[string]treeEntry) string {
	var b strings.Builder
	for name, w := range want {
		if g, ok := got[name]; !ok {
			fmt.Fprintf(&b, "missing %s\n", name)
		} else if g != w {
			fmt.Fprintf(&b, "%s: %v %.16s, want %v %.16s\n", name, g.mode, g.data, w.mode, w.data)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			fmt.Fprintf(&b, "extra %s\n", name)
		}
	}
	return b.String()
}
