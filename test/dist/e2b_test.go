package dist

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/e2b"
)

// instruction is one Dockerfile instruction: its keyword and the rest of
// its line, continuation lines joined.
type instruction struct{ keyword, args string }

// dockerfile reads a Dockerfile's instructions, without comments.
func dockerfile(t *testing.T, file string) []instruction {
	t.Helper()
	var out []instruction
	var cur string
	for _, line := range strings.Split(string(readFile(t, file)), "\n") {
		line = strings.TrimSpace(line)
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if more, ok := strings.CutSuffix(line, `\`); ok {
			cur += strings.TrimSpace(more) + " "
			continue
		}
		cur += line
		keyword, args, _ := strings.Cut(cur, " ")
		out = append(out, instruction{strings.ToUpper(keyword), strings.Join(strings.Fields(args), " ")})
		cur = ""
	}
	if cur != "" {
		t.Fatalf("%s ends in a continuation line", file)
	}
	return out
}

// runtimeImageLayout is what scripts/build-runtime-image puts into the
// runtime image: the Runtime user's name and ids, the environment
// directories and the working directory.
type runtimeImageLayout struct {
	user, uid, gid, workdir string
	envDirs                 []string
}

func readRuntimeImageLayout(t *testing.T, script string) runtimeImageLayout {
	t.Helper()
	src := string(readFile(t, script))
	one := func(pattern string) string {
		m := regexp.MustCompile(pattern).FindStringSubmatch(src)
		if m == nil {
			t.Fatalf("%s: no match for %s: the test reads the script's layout and must be updated with it", script, pattern)
		}
		return m[1]
	}
	l := runtimeImageLayout{
		uid:     one(`(?m)^runtime_uid=(\d+)$`),
		gid:     one(`(?m)^runtime_gid=(\d+)$`),
		user:    one(`(?m)^([a-z_][a-z0-9_-]*):x:\$runtime_uid:\$runtime_gid:`),
		workdir: one(`"WorkingDir":"([^"]+)"`),
		envDirs: strings.Fields(one(`(?m)^env_dirs=\(([^)]*)\)$`)),
	}
	if !strings.Contains(src, `"$rootfs/usr/local/bin/berth-runtime"`) || runtimebootstrap.BinaryPath != "/usr/local/bin/berth-runtime" {
		t.Fatalf("%s no longer installs berth-runtime at runtimebootstrap.BinaryPath %s", script, runtimebootstrap.BinaryPath)
	}
	return l
}

// TestE2BTemplateMatchesTheRuntimeImage: the E2B template's definition
// (deploy/e2b/e2b.Dockerfile) gives a sandbox the runtime image's layout
// (scripts/build-runtime-image) and what the E2B adapter relies on, so
// the two cannot drift apart silently: the same binary path
// (runtimebootstrap.BinaryPath, where RuntimeCommand starts it), the
// Runtime user with the image's name and ids and envd's user
// (e2b.RuntimeUser) the same, its private home the bootstrap file's
// folder, the image's environment directories and working directory
// owned by it, a base with /etc/os-release and coreutils' install
// (e2b.InstallPath), and no start command. It then writes the build
// context with scripts/build-runtime-image --e2b-context and checks that
// it holds this definition and the given binary, unchanged. No root, no
// engine, no network.
func TestE2BTemplateMatchesTheRuntimeImage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	def := filepath.Join(root, "deploy/e2b/e2b.Dockerfile")
	img := readRuntimeImageLayout(t, filepath.Join(root, "scripts/build-runtime-image"))
	if img.user != e2b.RuntimeUser {
		t.Errorf("the runtime image's user is %q, the E2B adapter's envd user %q", img.user, e2b.RuntimeUser)
	}
	home := path.Dir(runtimebootstrap.Path)

	got := map[string][]string{}
	for _, in := range dockerfile(t, def) {
		got[in.keyword] = append(got[in.keyword], in.args)
	}
	for keyword := range got {
		if !slices.Contains([]string{"FROM", "RUN", "COPY", "WORKDIR", "USER"}, keyword) {
			// CMD or ENTRYPOINT would be a start command, ENV could carry
			// a value into every sandbox; E2B's parser drops the rest.
			t.Errorf("%s has a %s instruction: the template has no start command and needs none of it", def, keyword)
		}
	}
	// One stage from a base E2B's builder accepts (it reads
	// /etc/os-release) whose coreutils are essential, so install is at
	// e2b.InstallPath.
	if from := got["FROM"]; len(from) != 1 || !regexp.MustCompile(`^(debian|ubuntu):[a-z0-9._-]+$`).MatchString(from[0]) {
		t.Errorf("FROM %q: want one stage FROM a pinned debian or ubuntu tag", from)
	}
	if e2b.InstallPath != "/usr/bin/install" {
		t.Errorf("e2b.InstallPath is %s: Debian's coreutils install is /usr/bin/install", e2b.InstallPath)
	}
	if copies := got["COPY"]; !slices.Equal(copies, []string{"bin/berth-runtime " + runtimebootstrap.BinaryPath}) {
		t.Errorf("COPY %q: want the release's bin/berth-runtime at %s", copies, runtimebootstrap.BinaryPath)
	}
	if argv := e2b.RuntimeCommand(); argv[0] != runtimebootstrap.BinaryPath {
		t.Errorf("the adapter starts %s", argv[0])
	}
	run := strings.Join(got["RUN"], " && ")
	dirs := []string{img.workdir, "/environment"}
	for _, d := range img.envDirs {
		dirs = append(dirs, "/"+d)
	}
	for _, want := range []string{
		"groupadd --gid " + img.gid + " " + img.user,
		"useradd --uid " + img.uid + " --gid " + img.gid + " --home-dir " + home + " --create-home --shell /bin/sh " + img.user,
		"chmod 0700 " + home,
		"install -d -o " + img.uid + " -g " + img.gid + " -m 0755 " + strings.Join(dirs, " "),
		"chown 0:0 " + runtimebootstrap.BinaryPath,
		"chmod 0755 " + runtimebootstrap.BinaryPath,
	} {
		if !strings.Contains(run, want) {
			t.Errorf("%s runs no %q (the runtime image's layout)", def, want)
		}
	}
	if w := got["WORKDIR"]; !slices.Equal(w, []string{img.workdir}) {
		t.Errorf("WORKDIR %q, the runtime image's %s", w, img.workdir)
	}
	if u := got["USER"]; !slices.Equal(u, []string{e2b.RuntimeUser}) {
		t.Errorf("USER %q, want %s (the template's default user)", u, e2b.RuntimeUser)
	}

	// The build context: this definition and the given binary, as they are.
	ctx := filepath.Join(t.TempDir(), "context")
	binary := filepath.Join(t.TempDir(), "berth-runtime")
	if err := os.WriteFile(binary, []byte("#!/bin/sh\n# stands in for the release's berth-runtime\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "scripts/build-runtime-image"), "--e2b-context", ctx)
	cmd.Env = append(os.Environ(), "BERTH_RUNTIME_BINARY="+binary)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("build-runtime-image --e2b-context: %v", err)
	}
	if last := strings.TrimSpace(string(out)); last != "BERTH_E2B_TEMPLATE_CONTEXT="+ctx {
		t.Errorf("it printed %q", last)
	}
	if !bytes.Equal(readFile(t, filepath.Join(ctx, "e2b.Dockerfile")), readFile(t, def)) {
		t.Error("the context's e2b.Dockerfile is not deploy/e2b/e2b.Dockerfile")
	}
	if !bytes.Equal(readFile(t, filepath.Join(ctx, "bin/berth-runtime")), readFile(t, binary)) {
		t.Error("the context's bin/berth-runtime is not BERTH_RUNTIME_BINARY")
	}
	if fi, err := os.Stat(filepath.Join(ctx, "bin/berth-runtime")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/berth-runtime: %v, %v", fi, err)
	}
}
