package microsandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// MaxOutput bounds what the adapter keeps of one msb call's stdout and of
// its stderr; the rest is discarded (and Result.Truncated set).
const MaxOutput = 4 << 20

// fixedPath is the PATH msb runs with; the node agent's is never passed.
const fixedPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// killGrace is how long a cancelled msb call may take to exit after
// SIGTERM before its process group is SIGKILLed.
const killGrace = 2 * time.Second

// Invocation is one msb call: its argv after the executable and its
// stdin (nil: empty).
type Invocation struct {
	Args  []string
	Stdin io.Reader
	// Limit bounds what is kept of each of stdout and stderr (0:
	// MaxOutput). The caller bounds it (RunCommand: the command's output
	// limit, at most sandbox.MaxOutputLimit, and its completion record).
	Limit int
}

// tailSize is how many of the last bytes of stderr a Result keeps beside
// its bounded prefix (RunCommand's completion record is at the end).
const tailSize = 128

// Result is what one msb call returned. ExitCode is -1 when the process did
// not exit by itself (it was signalled).
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int
	Truncated      bool
	// StdoutTotal and StderrTotal count every byte written to each stream;
	// StderrTail holds the last tailSize of them.
	StdoutTotal, StderrTotal int
	StderrTail               []byte
}

// Runner runs msb calls. Exec is the real one; tests may point it at a
// fixture executable that behaves like msb (never a fake adapter).
type Runner interface {
	Run(ctx context.Context, inv Invocation) (Result, error)
}

// ErrNotExited is returned by Exec.Run when the call's context ended before
// msb exited by itself: the call's outcome is unknown. Run returns it only
// after the process group is gone.
var ErrNotExited = errors.New("msb call did not complete")

// Exec runs the msb executable at Path with MSB_HOME=Home and a fixed
// environment.
type Exec struct {
	Path string
	Home string
}

// Run starts msb in its own process group and waits for it to exit. When
// ctx ends first it signals the group (SIGTERM, then SIGKILL after
// killGrace) and still waits for the exit before it returns ErrNotExited:
// a call of ours never runs behind the caller's back.
func (e Exec) Run(ctx context.Context, inv Invocation) (Result, error) {
	cmd := exec.Command(e.Path, inv.Args...)
	cmd.Env = []string{"MSB_HOME=" + e.Home, "HOME=" + e.Home, "PATH=" + fixedPath, "NO_COLOR=1", "LANG=C.UTF-8"}
	cmd.Dir = e.Home
	cmd.Stdin = inv.Stdin
	limit := MaxOutput
	if inv.Limit > 0 {
		limit = inv.Limit
	}
	stdout, stderr := &boundedBuffer{max: limit}, &boundedBuffer{max: limit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Pdeathsig: an msb call never outlives the node agent, so a call
	// of a dead agent process cannot still be running behind the next
	// one (doc.go, the call fence).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return Result{ExitCode: -1}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(killGrace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
		if cmd.ProcessState == nil || !cmd.ProcessState.Exited() || ctx.Err() != nil {
			return result(cmd, stdout, stderr), ErrNotExited
		}
	}
	res := result(cmd, stdout, stderr)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return res, err
	}
	return res, nil
}

func result(cmd *exec.Cmd, stdout, stderr *boundedBuffer) Result {
	code := -1
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		code = cmd.ProcessState.ExitCode()
	}
	return Result{
		Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code, Truncated: stdout.over || stderr.over,
		StdoutTotal: stdout.total, StderrTotal: stderr.total, StderrTail: stderr.tail,
	}
}

// boundedBuffer keeps the first max bytes written to it and discards the
// rest, so a chatty msb cannot grow the node agent's memory. It also
// counts every byte and keeps the last tailSize. The buffer is a field,
// not embedded: an embedded bytes.Buffer's ReadFrom would let io.Copy
// (which os/exec uses) bypass Write and its bound.
type boundedBuffer struct {
	buf   bytes.Buffer
	max   int
	over  bool
	total int
	tail  []byte
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.total += len(p)
	b.tail = append(b.tail, p[max(0, len(p)-tailSize):]...)
	if len(b.tail) > tailSize {
		b.tail = append([]byte(nil), b.tail[len(b.tail)-tailSize:]...)
	}
	if room := b.max - b.buf.Len(); room < len(p) {
		b.over = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

// Bytes returns what was kept.
func (b *boundedBuffer) Bytes() []byte { return b.buf.Bytes() }
