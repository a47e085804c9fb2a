package turnexec

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MaxChunkBytes bounds the data of one Chunk (the wire limit of
// berth.runtime.v1 TurnOutput).
const MaxChunkBytes = 64 << 10

// DefaultMaxOutputBytes is the per-stream bound used when a Turn gives none.
const DefaultMaxOutputBytes = 1 << 20

// Defaults of a zero Runner.
const (
	DefaultWorkspaceRoot = "/workspace"
	DefaultPath          = "/usr/local/bin:/usr/bin:/bin"
	DefaultHome          = "/home/runtime"
	DefaultShell         = "/bin/sh"
	// DefaultWaitDelay bounds how long Run waits for the output pipes after
	// the process exited or was killed: a process that escaped the group
	// (setsid) and holds a pipe must not hold the Turn forever.
	DefaultWaitDelay = 2 * time.Second
)

// Fixed failure codes of OutcomeFailed (the wire's failure_code values).
const (
	CodeInvalidTurn             = "invalid_turn"
	CodeWorkingDirectoryMissing = "working_directory_missing"
	CodeProgramNotFound         = "program_not_found"
	CodeStartFailed             = "start_failed"
)

// Stream names an output stream.
type Stream int

// The output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// Outcome is how a Turn ended.
type Outcome int

// The outcomes, matching berth.runtime.v1 TurnResult.Outcome.
const (
	// Exited: the process exited, or was killed by a signal the Runner did
	// not send.
	Exited Outcome = 1
	// TimedOut: the Turn's timeout passed and its process group was killed.
	TimedOut Outcome = 2
	// Cancelled: the context was cancelled and the process group was killed.
	Cancelled Outcome = 3
	// Failed: the process could not be started; Result.FailureCode says why.
	Failed Outcome = 4
)

func (o Outcome) String() string {
	switch o {
	case Exited:
		return "exited"
	case TimedOut:
		return "timed_out"
	case Cancelled:
		return "cancelled"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Turn is one command to run. Exactly one of Argv and Script is set.
type Turn struct {
	// Argv is the program and its arguments; Argv[0] is resolved through
	// the Turn's PATH when it has no slash, and relative to Dir when it is
	// a relative path with a slash.
	Argv []string
	// Script runs with the Runner's shell as "sh -c Script".
	Script string
	// Dir is the working directory: absolute, clean and under the
	// workspace root. Empty means the workspace root.
	Dir string
	// Env adds variables to the fixed base environment (PATH, HOME) and
	// may override them. Names must match [A-Za-z_][A-Za-z0-9_]* and must
	// not start with BERTH_ (in any case); values must not hold NUL.
	Env map[string]string
	// Stdin is the process's standard input; nil means empty.
	Stdin []byte
	// Timeout bounds the run; zero means no timeout.
	Timeout time.Duration
	// MaxOutputBytes bounds each output stream; zero means
	// DefaultMaxOutputBytes.
	MaxOutputBytes int64
}

// Chunk is a piece of one output stream. Offset is the number of bytes of
// the stream delivered before it.
type Chunk struct {
	Stream Stream
	Offset int64
	Data   []byte
}

// Events receives a Turn's progress. Its functions are never called
// concurrently, and never after Run returns. Either may be nil.
type Events struct {
	// Started is called once, when the process has started and before any
	// output. It is not called for a Turn that fails to start.
	Started func()
	// Output is called for each chunk, in order per stream. Data is the
	// callee's to keep. A slow Output slows the process down (its pipe
	// fills) rather than losing output.
	Output func(Chunk)
}

// Result is how a Turn ended.
type Result struct {
	Outcome Outcome
	// ExitCode is the exit status; 128+Signal for a process killed by a
	// signal the Runner did not send.
	ExitCode int
	// Signal is the signal that killed the process, or 0.
	Signal int
	// FailureCode is one of the Code constants for OutcomeFailed.
	FailureCode string
	// StdoutBytes and StderrBytes count everything produced, including
	// bytes dropped beyond the bound.
	StdoutBytes, StderrBytes int64
	// StdoutTruncated and StderrTruncated report dropped bytes.
	StdoutTruncated, StderrTruncated bool
}

// Runner runs Turns. The zero Runner uses the Default constants.
type Runner struct {
	// WorkspaceRoot is the folder every working directory must be under.
	WorkspaceRoot string
	// Path and Home are the base environment's PATH and HOME.
	Path, Home string
	// Shell runs Turn.Script.
	Shell string
	// WaitDelay bounds the wait for the output pipes once the process has
	// exited or been killed.
	WaitDelay time.Duration
}

func (r *Runner) root() string {
	if r == nil || r.WorkspaceRoot == "" {
		return DefaultWorkspaceRoot
	}
	return r.WorkspaceRoot
}

func (r *Runner) path() string {
	if r == nil || r.Path == "" {
		return DefaultPath
	}
	return r.Path
}

func (r *Runner) home() string {
	if r == nil || r.Home == "" {
		return DefaultHome
	}
	return r.Home
}

func (r *Runner) shell() string {
	if r == nil || r.Shell == "" {
		return DefaultShell
	}
	return r.Shell
}

func (r *Runner) waitDelay() time.Duration {
	if r == nil || r.WaitDelay <= 0 {
		return DefaultWaitDelay
	}
	return r.WaitDelay
}

func failed(code string) Result { return Result{Outcome: Failed, FailureCode: code} }

// Run runs t and returns how it ended. It returns once the process has been
// waited for and its output delivered (or, for output held open by a
// process that left the group, once the Runner's WaitDelay has passed).
// Cancelling ctx kills the process group and gives OutcomeCancelled.
func (r *Runner) Run(ctx context.Context, t Turn, ev Events) Result {
	p, code := r.prepare(t)
	if code != "" {
		return failed(code)
	}
	if err := ctx.Err(); err != nil {
		return Result{Outcome: Cancelled}
	}

	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if t.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, t.Timeout)
	}
	defer cancel()

	out := &output{ev: ev}
	stdout := &streamWriter{out: out, stream: Stdout, bound: p.bound}
	stderr := &streamWriter{out: out, stream: Stderr, bound: p.bound}
	cmd, killed := r.process(ctx, runCtx, t, p, stdout, stderr)
	if res, ok := startProcess(ctx, runCtx, cmd, out, ev); !ok {
		return res
	}

	_ = cmd.Wait() // the outcome comes from ProcessState and killed
	children.Lock()
	delete(children.pids, cmd.Process.Pid)
	children.Unlock()
	return processResult(cmd, out, stdout, stderr, p.bound, killed)
}

// killRecord is why cmd.Cancel killed a Turn's process group: Cancelled or
// TimedOut, zero when it did not. Cancel sets it before it kills; Run
// reads it after Wait.
type killRecord struct {
	mu sync.Mutex
	by Outcome
}

// process builds t's command under runCtx (ctx bounded by the Turn's
// timeout). argv[0] is absolute, so exec does not look it up in the
// daemon's PATH. The process leads its own group, so a cancellation or the
// timeout kills the group whole, and the returned record says which of the
// two it was.
func (r *Runner) process(ctx, runCtx context.Context, t Turn, p prepared, stdout, stderr *streamWriter) (*exec.Cmd, *killRecord) {
	cmd := exec.CommandContext(runCtx, p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	if len(t.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(t.Stdin)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = r.waitDelay()
	killed := &killRecord{}
	cmd.Cancel = func() error {
		killed.mu.Lock()
		if ctx.Err() != nil {
			killed.by = Cancelled
		} else {
			killed.by = TimedOut
		}
		killed.mu.Unlock()
		return killGroup(cmd.Process.Pid)
	}
	return cmd, killed
}

// startProcess starts cmd and records its pid among the children to reap.
// It holds the output lock across Start so that Started precedes any
// chunk. When the start fails it returns the Turn's result and false:
// Cancelled or TimedOut when the context ended first, otherwise
// program_not_found or start_failed.
func startProcess(ctx, runCtx context.Context, cmd *exec.Cmd, out *output, ev Events) (Result, bool) {
	out.mu.Lock()
	children.Lock()
	err := cmd.Start()
	if err == nil {
		children.pids[cmd.Process.Pid] = true
	}
	children.Unlock()
	if err != nil {
		out.closed = true
		out.mu.Unlock()
		if runCtx.Err() != nil {
			if ctx.Err() != nil {
				return Result{Outcome: Cancelled}, false
			}
			return Result{Outcome: TimedOut}, false
		}
		if errors.Is(err, fs.ErrNotExist) {
			return failed(CodeProgramNotFound), false
		}
		return failed(CodeStartFailed), false
	}
	if ev.Started != nil {
		ev.Started()
	}
	out.mu.Unlock()
	return Result{}, true
}

// processResult closes the output of a waited-for process and says how it
// ended: Cancelled or TimedOut when Cancel killed it, otherwise Exited with
// its exit code (128 plus the signal for a signalled process), with the
// byte counts of both streams and whether bound truncated them.
func processResult(cmd *exec.Cmd, out *output, stdout, stderr *streamWriter, bound int64, killed *killRecord) Result {
	out.mu.Lock()
	out.closed = true
	res := Result{
		StdoutBytes: stdout.total, StderrBytes: stderr.total,
		StdoutTruncated: stdout.total > bound, StderrTruncated: stderr.total > bound,
	}
	out.mu.Unlock()
	killed.mu.Lock()
	res.Outcome = killed.by
	killed.mu.Unlock()
	if res.Outcome != 0 {
		return res
	}
	res.Outcome = Exited
	if ws, ok := waitStatus(cmd.ProcessState); ok && ws.Signaled() {
		res.Signal = int(ws.Signal())
		res.ExitCode = 128 + res.Signal
	} else if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	return res
}

// prepared is a checked Turn, ready to start.
type prepared struct {
	argv  []string // argv[0] resolved
	dir   string
	env   []string
	bound int64
}

// prepare checks t and resolves its program; the string is a failure code.
func (r *Runner) prepare(t Turn) (prepared, string) {
	if t.Timeout < 0 || t.MaxOutputBytes < 0 {
		return prepared{}, CodeInvalidTurn
	}
	env, code := r.environment(t.Env)
	if code != "" {
		return prepared{}, code
	}
	if (len(t.Argv) == 0) == (t.Script == "") {
		return prepared{}, CodeInvalidTurn
	}
	dir, code := r.workingDir(t.Dir)
	if code != "" {
		return prepared{}, code
	}
	argv, code := r.command(t, env, dir)
	if code != "" {
		return prepared{}, code
	}
	bound := t.MaxOutputBytes
	if bound == 0 {
		bound = DefaultMaxOutputBytes
	}
	return prepared{argv: argv, dir: dir, env: env, bound: bound}, ""
}

func waitStatus(ps *os.ProcessState) (syscall.WaitStatus, bool) {
	if ps == nil {
		return 0, false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ws, ok
}

// killGroup sends SIGKILL to the process group led by pid (Setpgid makes
// the pgid equal the child's pid), which reaches grandchildren that did not
// leave the group.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// workingDir checks dir lexically against the workspace root and then that
// it exists. The check is lexical on purpose: a Turn runs arbitrary code in
// the sandbox and can change directory itself, so the rule keeps Turns
// honest about where they start rather than being a security boundary.
func (r *Runner) workingDir(dir string) (string, string) {
	root := r.root()
	if dir == "" {
		dir = root
	}
	if strings.IndexByte(dir, 0) >= 0 || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return "", CodeInvalidTurn
	}
	for _, elem := range strings.Split(dir, "/") {
		if elem == ".." {
			return "", CodeInvalidTurn
		}
	}
	if dir != root && !strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/") {
		return "", CodeInvalidTurn
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return "", CodeWorkingDirectoryMissing
	case err != nil:
		return "", CodeStartFailed
	case !info.IsDir():
		return "", CodeWorkingDirectoryMissing
	}
	return dir, ""
}

// ReservedEnvPrefix starts the environment names a Turn may not set.
const ReservedEnvPrefix = "BERTH_"

// environment returns the base environment plus additions, sorted by name.
func (r *Runner) environment(add map[string]string) ([]string, string) {
	vars := map[string]string{"PATH": r.path(), "HOME": r.home()}
	for name, value := range add {
		if !validEnvName(name) || strings.HasPrefix(strings.ToUpper(name), ReservedEnvPrefix) ||
			strings.IndexByte(value, 0) >= 0 {
			return nil, CodeInvalidTurn
		}
		vars[name] = value
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names)
	env := make([]string, 0, len(names))
	for _, name := range names {
		env = append(env, name+"="+vars[name])
	}
	return env, ""
}

// validEnvName reports whether name is a portable environment name:
// [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// command returns the argv to execute with argv[0] resolved.
func (r *Runner) command(t Turn, env []string, dir string) ([]string, string) {
	if (len(t.Argv) == 0) == (t.Script == "") {
		return nil, CodeInvalidTurn
	}
	if t.Script != "" {
		if strings.IndexByte(t.Script, 0) >= 0 {
			return nil, CodeInvalidTurn
		}
		return []string{r.shell(), "-c", t.Script}, ""
	}
	for _, a := range t.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, CodeInvalidTurn
		}
	}
	prog := t.Argv[0]
	if prog == "" {
		return nil, CodeInvalidTurn
	}
	argv := append([]string(nil), t.Argv...)
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(dir, prog)
		}
		if _, err := os.Stat(prog); err != nil {
			return nil, CodeProgramNotFound
		}
		argv[0] = prog
		return argv, ""
	}
	found := lookPath(prog, envValue(env, "PATH"))
	if found == "" {
		return nil, CodeProgramNotFound
	}
	argv[0] = found
	return argv, ""
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath resolves prog through path (the Turn's PATH, not the daemon's).
// Relative and empty PATH entries are skipped, as a Turn's working
// directory must not decide which program runs.
func lookPath(prog, path string) string {
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, prog)
		info, err := os.Stat(p)
		if err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// output serialises Events.Output across both streams and stops delivery
// once Run is done.
type output struct {
	mu     sync.Mutex
	ev     Events
	closed bool
}

// streamWriter records the first bound bytes of one stream as chunks and
// counts the rest.
type streamWriter struct {
	out    *output
	stream Stream
	bound  int64
	total  int64 // produced so far; guarded by out.mu
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	keep := int64(len(p))
	if room := w.bound - w.total; room < keep {
		keep = max(room, 0)
	}
	for off := int64(0); off < keep && !w.out.closed; {
		n := min(keep-off, MaxChunkBytes)
		if w.out.ev.Output != nil {
			data := append([]byte(nil), p[off:off+n]...)
			w.out.ev.Output(Chunk{Stream: w.stream, Offset: w.total + off, Data: data})
		}
		off += n
	}
	w.total += int64(len(p))
	return len(p), nil
}
