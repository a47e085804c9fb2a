package microsandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// completionScript runs the command ("$@", never through a shell's
// parsing) and then writes its exit status as the last line of stderr,
// after the per-call nonce in $0: the completion record. msb's own exit
// code cannot tell the command's failure from msb's (both may be 1), so
// only this record settles a command.
const completionScript = `"$@"; s=$?; printf '\n%s:%d\n' "$0" "$s" >&2; exit 0`

// shellPath is the Runtime image's shell (busybox sh).
const shellPath = "/bin/sh"

// RunCommand runs cmd in ref's running sandbox as the Runtime user, with
// stdin through msb's stdin (never argv), each stream bounded, and the
// command's exit status from its completion record. Without the record (no
// answer, msb failed, the record truncated) the result is
// ErrCommandUnconfirmed; a command is never resent.
func (p *Provider) RunCommand(ctx context.Context, ref sandbox.Reference, cmd sandbox.Command) (sandbox.CommandResult, error) {
	if err := p.ops.Check(sandbox.OpRunCommand); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := cmd.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	rec, err := p.inspectOwned(ctx, ref)
	if err != nil {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", err)
	}
	if rec.Status != statusRunning {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrRuntimeNotRunning)
	}
	return p.exec(ctx, rec.Name, cmd)
}

func (p *Provider) exec(ctx context.Context, name string, cmd sandbox.Command) (sandbox.CommandResult, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrFailedPrecondition)
	}
	nonce := "berth-exit-" + hex.EncodeToString(raw[:])
	dir := cmd.Directory
	if dir == "" {
		dir = WorkspacePath
	}
	args := []string{"exec", "--no-tty", "-q", "-u", RuntimeUser, "-w", dir, name, "--", shellPath, "-c", completionScript, nonce}
	limit := cmd.Limit()
	res, err := p.msb.Run(ctx, Invocation{
		Args: append(args, cmd.Args...), Stdin: bytes.NewReader(cmd.Stdin),
		Limit: limit + len(nonce) + 16,
	})
	if classify(res, err) != ranOK {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrCommandUnconfirmed)
	}
	code, size, ok := completion(res, nonce)
	if !ok {
		return sandbox.CommandResult{}, fmt.Errorf("run command: no completion record: %w", errdefs.ErrCommandUnconfirmed)
	}
	stderr := res.Stderr[:min(len(res.Stderr), size, limit)]
	stdout := res.Stdout[:min(len(res.Stdout), limit)]
	return sandbox.CommandResult{
		Stdout: bytes.Clone(stdout), Stderr: bytes.Clone(stderr),
		StdoutTruncated: res.StdoutTotal > limit, StderrTruncated: size > limit,
		ExitCode: code,
	}, nil
}

// completion finds the completion record at the very end of stderr and
// returns the command's exit code and the size of its own stderr.
func completion(res Result, nonce string) (code, size int, ok bool) {
	tail := res.StderrTail
	if !bytes.HasSuffix(tail, []byte("\n")) {
		return 0, 0, false
	}
	start := bytes.LastIndex(tail, []byte("\n"+nonce+":"))
	if start < 0 {
		return 0, 0, false
	}
	digits := tail[start+len(nonce)+2 : len(tail)-1]
	code, err := strconv.Atoi(string(digits))
	if err != nil || code < 0 || code > 255 || strconv.Itoa(code) != string(digits) {
		return 0, 0, false
	}
	return code, res.StderrTotal - (len(tail) - start), true
}
