package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"berth.dev/sandbox"
)

// RunCommand runs cmd's argv (no shell) through envd in the allocation's
// one owned running sandbox: stdin through SendInput and CloseStdin,
// each output stream kept byte for byte up to the command's limit (the
// rest counted as truncation), and envd's exit code. A stream that ends
// without the process's end event is ErrCommandUnconfirmed, never
// replayed; the process is then SIGKILLed best-effort by its tag, and
// envd's own lifetime (the caller's deadline) bounds it anyway.
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
	var res sandbox.CommandResult
	err := p.fenced(ctx, ref, func(ctx context.Context) error {
		s, err := p.one(ctx, ref)
		if err != nil {
			return err
		}
		if state(s) != sandbox.StateRunning {
			return errNotRunning
		}
		d, err := p.detail(ctx, ref, s.SandboxID)
		if err != nil {
			return err
		}
		if state(d) != sandbox.StateRunning {
			return errNotRunning
		}
		res, err = p.run(ctx, p.c.envdFor(d), cmd)
		return err
	})
	if err != nil {
		if isContext(err) {
			return sandbox.CommandResult{}, errCommandUnknown
		}
		return sandbox.CommandResult{}, err
	}
	return res, nil
}

// bounded keeps the first limit bytes of a stream and notes the rest.
type bounded struct {
	limit     int
	data      []byte
	truncated bool
}

func (b *bounded) add(p []byte) {
	room := b.limit - len(b.data)
	if len(p) > room {
		b.truncated = true
		p = p[:max(room, 0)]
	}
	b.data = append(b.data, p...)
}

// run starts cmd and collects its events until the end event.
func (p *Provider) run(ctx context.Context, e envd, cmd sandbox.Command) (sandbox.CommandResult, error) {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	tag := "berth-command-" + hex.EncodeToString(nonce[:])
	var lifetime time.Duration
	if dl, ok := ctx.Deadline(); ok {
		lifetime = max(time.Until(dl), time.Millisecond)
	}
	st, err := e.start(ctx, startJSON{
		Process: processJSON{Cmd: cmd.Args[0], Args: append([]string{}, cmd.Args[1:]...), Envs: map[string]string{}, Cwd: cmd.Directory},
		Tag:     tag,
		Stdin:   len(cmd.Stdin) > 0,
	}, lifetime)
	if err != nil {
		if !notWritten(err) {
			p.killCommand(ctx, e, tag)
		}
		return sandbox.CommandResult{}, errCommandUnknown
	}
	defer st.close()

	events := make(chan eventJSON)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(events)
		for {
			ev, err := st.next()
			if err != nil {
				return
			}
			select {
			case events <- ev:
			case <-stop:
				return
			}
			if ev.Event.End != nil {
				return
			}
		}
	}()

	first, ok := <-events
	if !ok || first.Event.Start == nil {
		p.killCommand(ctx, e, tag)
		return sandbox.CommandResult{}, errCommandUnknown
	}
	if len(cmd.Stdin) > 0 {
		sel := selectorJSON{Pid: first.Event.Start.Pid}
		if e.sendInput(ctx, sel, cmd.Stdin) != nil || e.closeStdin(ctx, sel) != nil {
			p.killCommand(ctx, e, tag)
			return sandbox.CommandResult{}, errCommandUnknown
		}
	}
	stdout := bounded{limit: cmd.Limit()}
	stderr := bounded{limit: cmd.Limit()}
	for ev := range events {
		if d := ev.Event.Data; d != nil {
			stdout.add(d.Stdout)
			stderr.add(d.Stderr)
		}
		if end := ev.Event.End; end != nil {
			return sandbox.CommandResult{
				Stdout: stdout.data, Stderr: stderr.data,
				StdoutTruncated: stdout.truncated, StderrTruncated: stderr.truncated,
				ExitCode: int(end.ExitCode),
			}, nil
		}
	}
	p.killCommand(ctx, e, tag)
	return sandbox.CommandResult{}, errCommandUnknown
}

// killCommand SIGKILLs the command tagged tag, best-effort, bounded by
// killGrace even when ctx has ended (the caller gave up).
func (p *Provider) killCommand(ctx context.Context, e envd, tag string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
	defer cancel()
	_ = e.sigkill(kctx, selectorJSON{Tag: tag})
}
