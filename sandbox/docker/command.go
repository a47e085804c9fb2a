package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// RunCommand runs cmd in ref's running container as the Runtime user.
// Confidential input goes only through stdin. Each stream is kept in order
// and bounded (the rest is read and discarded, so the command can finish),
// and the actual exit code is returned. Without proof of completion the
// result is ErrCommandUnconfirmed; a command is never resent.
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
	c, err := p.inspectOwned(ctx, ref)
	if err != nil {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", err)
	}
	if c.State == nil || c.State.Status != container.StateRunning {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrRuntimeNotRunning)
	}
	return p.exec(ctx, c.ID, cmd)
}

func (p *Provider) exec(ctx context.Context, containerID string, cmd sandbox.Command) (sandbox.CommandResult, error) {
	dir := cmd.Directory
	if dir == "" {
		dir = WorkspacePath
	}
	created, err := p.cli.ExecCreate(ctx, containerID, client.ExecCreateOptions{
		User:         RuntimeUser,
		AttachStdin:  len(cmd.Stdin) > 0,
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   dir,
		Cmd:          cmd.Args,
	})
	switch {
	case err == nil:
	case classify(err) == outcomeConflict:
		// The engine refuses exec in a container that is not running.
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrRuntimeNotRunning)
	default:
		return sandbox.CommandResult{}, fmt.Errorf("run command: create exec: %w", errdefs.ErrCommandUnconfirmed)
	}

	attached, err := p.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return sandbox.CommandResult{}, fmt.Errorf("run command: start exec: %w", errdefs.ErrCommandUnconfirmed)
	}
	defer attached.Close()

	limit := cmd.Limit()
	stdout, stderr := &boundedBuffer{limit: limit}, &boundedBuffer{limit: limit}
	done := make(chan error, 1)
	go func() {
		if len(cmd.Stdin) > 0 {
			if _, err := attached.Conn.Write(cmd.Stdin); err != nil {
				done <- err
				return
			}
		}
		if err := attached.CloseWrite(); err != nil {
			done <- err
			return
		}
		_, err := stdcopy.StdCopy(stdout, stderr, attached.Reader)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return sandbox.CommandResult{}, fmt.Errorf("run command: read output: %w", errdefs.ErrCommandUnconfirmed)
		}
	case <-ctx.Done():
		attached.Close()
		<-done
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrCommandUnconfirmed)
	}

	code, err := p.exitCode(ctx, created.ID)
	if err != nil {
		return sandbox.CommandResult{}, err
	}
	return sandbox.CommandResult{
		Stdout: stdout.buf, Stderr: stderr.buf,
		StdoutTruncated: stdout.truncated, StderrTruncated: stderr.truncated,
		ExitCode: code,
	}, nil
}

// exitCode reads the finished exec's exit code. The output stream can end a
// moment before the engine records the exit, so it polls briefly, bounded by
// ctx and a fixed number of reads.
func (p *Provider) exitCode(ctx context.Context, execID string) (int, error) {
	delay := 5 * time.Millisecond
	for range 20 {
		res, err := p.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, fmt.Errorf("run command: inspect exec: %w", errdefs.ErrCommandUnconfirmed)
		}
		if !res.Running {
			return res.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("run command: %w", errdefs.ErrCommandUnconfirmed)
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
	return 0, fmt.Errorf("run command: exit not recorded: %w", errdefs.ErrCommandUnconfirmed)
}

// boundedBuffer keeps the first limit bytes written and counts the rest as
// truncated, accepting every write so the producer is never blocked.
type boundedBuffer struct {
	buf       []byte
	limit     int
	truncated bool
}

func (b *boundedBuffer) Write(data []byte) (int, error) {
	room := b.limit - len(b.buf)
	switch {
	case room >= len(data):
		b.buf = append(b.buf, data...)
	case room > 0:
		b.buf = append(b.buf, data[:room]...)
		b.truncated = true
	default:
		b.truncated = b.truncated || len(data) > 0
	}
	return len(data), nil
}
