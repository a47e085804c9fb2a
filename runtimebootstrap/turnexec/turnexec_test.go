package turnexec

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder collects a Turn's events and checks the chunk rules as they
// arrive: Started first, chunks bounded and contiguous per stream.
type recorder struct {
	t       *testing.T
	mu      sync.Mutex
	started int
	streams map[Stream]*bytes.Buffer
	order   []Chunk
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, streams: map[Stream]*bytes.Buffer{Stdout: {}, Stderr: {}}}
}

func (r *recorder) events() Events {
	return Events{
		Started: func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.started++
		},
		Output: func(c Chunk) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.started != 1 {
				r.t.Errorf("chunk before Started (started=%d)", r.started)
			}
			if len(c.Data) == 0 || len(c.Data) > MaxChunkBytes {
				r.t.Errorf("chunk of %d bytes", len(c.Data))
			}
			buf, ok := r.streams[c.Stream]
			if !ok {
				r.t.Errorf("chunk on stream %d", c.Stream)
				return
			}
			if c.Offset != int64(buf.Len()) {
				r.t.Errorf("stream %d: chunk at offset %d, want %d", c.Stream, c.Offset, buf.Len())
			}
			buf.Write(c.Data)
			r.order = append(r.order, c)
		},
	}
}

func (r *recorder) stdout() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.streams[Stdout].String()
}

func (r *recorder) stderr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.streams[Stderr].String()
}

func testRunner(t *testing.T) *Runner {
	t.Helper()
	return &Runner{WorkspaceRoot: t.TempDir(), WaitDelay: 500 * time.Millisecond}
}

func run(t *testing.T, r *Runner, turn Turn) (Result, *recorder) {
	t.Helper()
	rec := newRecorder(t)
	res := r.Run(context.Background(), turn, rec.events())
	return res, rec
}

func TestExitCodes(t *testing.T) {
	r := testRunner(t)
	for _, code := range []int{0, 1, 42} {
		res, rec := run(t, r, Turn{Script: "echo hi; echo err >&2; exit " + strconv.Itoa(code), Timeout: time.Minute})
		want := Result{Outcome: Exited, ExitCode: code, StdoutBytes: 3, StderrBytes: 4}
		if res != want {
			t.Errorf("exit %d: result %+v, want %+v", code, res, want)
		}
		if rec.stdout() != "hi\n" || rec.stderr() != "err\n" {
			t.Errorf("exit %d: stdout %q stderr %q", code, rec.stdout(), rec.stderr())
		}
		if rec.started != 1 {
			t.Errorf("exit %d: Started called %d times", code, rec.started)
		}
	}
}

func TestArgvRunsWithoutShell(t *testing.T) {
	r := testRunner(t)
	res, rec := run(t, r, Turn{Argv: []string{"printf", "%s|%s", "a b", "$HOME"}})
	if res.Outcome != Exited || res.ExitCode != 0 || rec.stdout() != "a b|$HOME" {
		t.Fatalf("result %+v stdout %q", res, rec.stdout())
	}
}

func TestKilledBySignalIsExited(t *testing.T) {
	r := testRunner(t)
	res, _ := run(t, r, Turn{Script: "kill -TERM $$; sleep 5"})
	want := Result{Outcome: Exited, ExitCode: 128 + int(syscall.SIGTERM), Signal: int(syscall.SIGTERM)}
	if res != want {
		t.Fatalf("result %+v, want %+v", res, want)
	}
}

// alive reports whether pid still exists, waiting up to 5s for it to go
// (an orphan is reaped by init shortly after it dies).
func goneWithin(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	r := testRunner(t)
	rec := newRecorder(t)
	start := time.Now()
	res := r.Run(context.Background(), Turn{
		Script:  "sleep 300 & echo $!; wait",
		Timeout: 500 * time.Millisecond,
	}, rec.events())
	if res.Outcome != TimedOut || res.ExitCode != 0 || res.Signal != 0 {
		t.Fatalf("result %+v, want timed out", res)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("Run took %v", took)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(rec.stdout()))
	if err != nil || pid <= 1 {
		t.Fatalf("grandchild pid %q", rec.stdout())
	}
	if !goneWithin(pid, 5*time.Second) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("grandchild %d survived the timeout", pid)
	}
}

func TestCancellation(t *testing.T) {
	r := testRunner(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder(t)
	ev := rec.events()
	output := ev.Output
	ev.Output = func(c Chunk) {
		output(c)
		if strings.Contains(string(c.Data), "ready") {
			cancel()
		}
	}
	res := r.Run(ctx, Turn{Script: "sleep 300 & echo $!; echo ready; wait", Timeout: time.Minute}, ev)
	if res.Outcome != Cancelled {
		t.Fatalf("result %+v, want cancelled", res)
	}
	pid, err := strconv.Atoi(strings.Fields(rec.stdout())[0])
	if err != nil {
		t.Fatalf("stdout %q", rec.stdout())
	}
	if !goneWithin(pid, 5*time.Second) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("grandchild %d survived the cancellation", pid)
	}

	// A context already done never starts the process.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	rec = newRecorder(t)
	if res := r.Run(done, Turn{Script: "echo no"}, rec.events()); res.Outcome != Cancelled || rec.started != 0 {
		t.Fatalf("done context: result %+v started %d", res, rec.started)
	}
}

func TestEscapedGrandchildDoesNotHoldTheTurn(t *testing.T) {
	r := testRunner(t)
	rec := newRecorder(t)
	start := time.Now()
	// setsid leaves the process group; the escaped sleep keeps stdout open.
	res := r.Run(context.Background(), Turn{Script: "setsid sh -c 'echo $$; exec sleep 30' & sleep 0.2; exit 7"}, rec.events())
	took := time.Since(start)
	if pid, err := strconv.Atoi(strings.TrimSpace(rec.stdout())); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if res.Outcome != Exited || res.ExitCode != 7 {
		t.Fatalf("result %+v", res)
	}
	if took > 20*time.Second {
		t.Fatalf("Run waited %v for a pipe held by an escaped process", took)
	}
}

func TestLargeOutputIsBounded(t *testing.T) {
	r := testRunner(t)
	data := make([]byte, 5<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(r.WorkspaceRoot, "big"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	res, rec := run(t, r, Turn{Argv: []string{"cat", "big"}, MaxOutputBytes: 1 << 20})
	want := Result{Outcome: Exited, StdoutBytes: 5 << 20, StdoutTruncated: true}
	if res != want {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	if got := rec.stdout(); got != string(data[:1<<20]) {
		t.Fatalf("recorded %d bytes, want the first %d bytes of the output exactly", len(got), 1<<20)
	}
	if len(rec.order) < (1<<20)/MaxChunkBytes {
		t.Fatalf("%d chunks", len(rec.order))
	}
}

func TestDefaultBound(t *testing.T) {
	r := testRunner(t)
	res, rec := run(t, r, Turn{Argv: []string{"head", "-c", strconv.Itoa(DefaultMaxOutputBytes + 10), "/dev/zero"}})
	if !res.StdoutTruncated || res.StdoutBytes != DefaultMaxOutputBytes+10 || len(rec.stdout()) != DefaultMaxOutputBytes {
		t.Fatalf("result %+v recorded %d", res, len(rec.stdout()))
	}
}

func TestStdinPassthrough(t *testing.T) {
	r := testRunner(t)
	in := make([]byte, 300<<10) // more than a pipe buffer
	for i := range in {
		in[i] = byte(i * 7)
	}
	res, rec := run(t, r, Turn{Argv: []string{"cat"}, Stdin: in})
	if res.Outcome != Exited || res.ExitCode != 0 || res.StdoutBytes != int64(len(in)) {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Equal([]byte(rec.stdout()), in) {
		t.Fatal("stdout differs from stdin")
	}
	// No stdin is an empty stdin, not the daemon's.
	res, rec = run(t, r, Turn{Argv: []string{"wc", "-c"}})
	if res.ExitCode != 0 || strings.TrimSpace(rec.stdout()) != "0" {
		t.Fatalf("result %+v stdout %q", res, rec.stdout())
	}
	// A process that ignores a large stdin still ends normally.
	res, _ = run(t, r, Turn{Script: "exit 3", Stdin: in})
	if res.Outcome != Exited || res.ExitCode != 3 {
		t.Fatalf("ignored stdin: result %+v", res)
	}
}

func TestInterleavedStreamsInOrder(t *testing.T) {
	r := testRunner(t)
	res, rec := run(t, r, Turn{Script: `i=0; while [ $i -lt 500 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`})
	if res.Outcome != Exited || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	var wantOut, wantErr strings.Builder
	for i := range 500 {
		wantOut.WriteString("out" + strconv.Itoa(i) + "\n")
		wantErr.WriteString("err" + strconv.Itoa(i) + "\n")
	}
	if rec.stdout() != wantOut.String() || rec.stderr() != wantErr.String() {
		t.Fatalf("streams out of order:\nstdout %q\nstderr %q", rec.stdout(), rec.stderr())
	}
	if res.StdoutBytes != int64(wantOut.Len()) || res.StderrBytes != int64(wantErr.Len()) {
		t.Fatalf("byte counts %+v", res)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("BERTH_RUNTIME_SECRET", "daemon-secret")
	t.Setenv("DAEMON_ONLY", "x")
	r := testRunner(t)
	r.Home = "/home/test"
	res, rec := run(t, r, Turn{Argv: []string{"env"}, Env: map[string]string{"FOO": "bar baz", "_x1": ""}})
	want := "FOO=bar baz\nHOME=/home/test\nPATH=" + DefaultPath + "\n_x1=\n"
	if res.ExitCode != 0 || rec.stdout() != want {
		t.Fatalf("result %+v env %q, want %q", res, rec.stdout(), want)
	}
	for _, name := range []string{"BERTH_X", "BERTH_", "berth_x", "Berth_Runtime", "1A", "A-B", "A=B", "", "A B"} {
		res, rec := run(t, r, Turn{Script: "echo ran", Env: map[string]string{name: "v"}})
		if res != failed(CodeInvalidTurn) || rec.started != 0 {
			t.Errorf("env name %q: result %+v started %d", name, res, rec.started)
		}
	}
	if res, _ := run(t, r, Turn{Script: "echo ran", Env: map[string]string{"A": "x\x00y"}}); res != failed(CodeInvalidTurn) {
		t.Errorf("NUL in value: %+v", res)
	}
}

func TestWorkingDirectory(t *testing.T) {
	r := testRunner(t)
	root := r.WorkspaceRoot
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{"": root, root: root, root + "/a/b": root + "/a/b"} {
		res, rec := run(t, r, Turn{Argv: []string{"pwd"}, Dir: dir})
		if res.ExitCode != 0 || rec.stdout() != want+"\n" {
			t.Errorf("dir %q: result %+v pwd %q", dir, res, rec.stdout())
		}
	}
	for dir, code := range map[string]string{
		root + "/..":         CodeInvalidTurn,
		root + "/../x":       CodeInvalidTurn,
		root + "/a/../b":     CodeInvalidTurn,
		root + "/a/":         CodeInvalidTurn,
		root + "//a":         CodeInvalidTurn,
		"a/b":                CodeInvalidTurn,
		"/":                  CodeInvalidTurn,
		"/etc":               CodeInvalidTurn,
		root + "x":           CodeInvalidTurn,
		root + "/a\x00":      CodeInvalidTurn,
		root + "/missing":    CodeWorkingDirectoryMissing,
		root + "/file":       CodeWorkingDirectoryMissing,
		root + "/file/under": CodeWorkingDirectoryMissing,
	} {
		res, rec := run(t, r, Turn{Script: "echo ran", Dir: dir})
		if res != failed(code) || rec.started != 0 {
			t.Errorf("dir %q: result %+v, want %s", dir, res, code)
		}
	}
}

func TestProgramNotFound(t *testing.T) {
	r := testRunner(t)
	// A program only on the daemon's PATH is not found: the Turn's PATH is fixed.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "daemon-only-tool"), []byte("#!/bin/sh\necho x\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	for _, argv := range [][]string{
		{"berth-no-such-program"},
		{"daemon-only-tool"},
		{"./missing"},
		{"/nonexistent/prog"},
	} {
		res, rec := run(t, r, Turn{Argv: argv})
		if res != failed(CodeProgramNotFound) || rec.started != 0 {
			t.Errorf("%q: result %+v", argv, res)
		}
	}
	// The Turn's own PATH is used for lookup.
	res, rec := run(t, r, Turn{Argv: []string{"daemon-only-tool"}, Env: map[string]string{"PATH": bin + ":/bin"}})
	if res.ExitCode != 0 || rec.stdout() != "x\n" {
		t.Fatalf("own PATH: result %+v stdout %q", res, rec.stdout())
	}
	// A relative program with a slash is relative to the working directory.
	if err := os.WriteFile(filepath.Join(r.WorkspaceRoot, "tool"), []byte("#!/bin/sh\necho local\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, rec = run(t, r, Turn{Argv: []string{"./tool"}})
	if res.ExitCode != 0 || rec.stdout() != "local\n" {
		t.Fatalf("./tool: result %+v stdout %q", res, rec.stdout())
	}
	// A file that exists but cannot be executed fails to start.
	if err := os.WriteFile(filepath.Join(r.WorkspaceRoot, "noexec"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, _ := run(t, r, Turn{Argv: []string{"./noexec"}}); res != failed(CodeStartFailed) {
		t.Fatalf("./noexec: %+v", res)
	}
}

func TestInvalidTurns(t *testing.T) {
	r := testRunner(t)
	for name, turn := range map[string]Turn{
		"neither":          {},
		"both":             {Argv: []string{"true"}, Script: "true"},
		"empty program":    {Argv: []string{""}},
		"NUL in argument":  {Argv: []string{"echo", "a\x00b"}},
		"NUL in script":    {Script: "echo a\x00"},
		"negative timeout": {Script: "true", Timeout: -time.Second},
		"negative bound":   {Script: "true", MaxOutputBytes: -1},
	} {
		res, rec := run(t, r, turn)
		if res != failed(CodeInvalidTurn) || rec.started != 0 {
			t.Errorf("%s: result %+v", name, res)
		}
	}
}

func TestZeroRunnerDefaults(t *testing.T) {
	var r *Runner
	if r.root() != DefaultWorkspaceRoot || r.shell() != DefaultShell || r.waitDelay() != DefaultWaitDelay {
		t.Fatal("nil Runner defaults")
	}
}

// FuzzPrepare checks that no Turn makes the checks panic, and that an
// accepted Turn respects the rules.
func FuzzPrepare(f *testing.F) {
	root := f.TempDir()
	if err := os.Mkdir(filepath.Join(root, "a"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Add("echo", "", root+"/a", "FOO", "bar", int64(0))
	f.Add("", "echo hi", root+"/../etc", "BERTH_X", "v", int64(-1))
	f.Add("./x", "", "", "A=B", "", int64(5))
	f.Add("sh", "", "", "berth_x", "", int64(5))
	r := &Runner{WorkspaceRoot: root}
	f.Fuzz(func(t *testing.T, prog, script, dir, name, value string, bound int64) {
		turn := Turn{Script: script, Dir: dir, Env: map[string]string{name: value}, MaxOutputBytes: bound}
		if prog != "" {
			turn.Argv = []string{prog, value}
		}
		p, code := r.prepare(turn)
		if code != "" {
			return
		}
		if p.dir != root && !strings.HasPrefix(p.dir, root+"/") || strings.Contains(p.dir, "/../") {
			t.Fatalf("accepted dir %q", p.dir)
		}
		if strings.HasPrefix(strings.ToUpper(name), "BERTH_") || p.bound <= 0 || !filepath.IsAbs(p.argv[0]) {
			t.Fatalf("accepted %+v", p)
		}
	})
}
