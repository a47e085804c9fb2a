package e2b

import (
	"context"
	"errors"
	"fmt"
	"time"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// The Runtime in the sandbox: the template installs berth-runtime at
// runtimebootstrap.BinaryPath and the runtime user's home (0700).
const (
	// RuntimeTag is envd's tag of the Runtime process: the evidence,
	// through process.Process/List, that the bootstrap's last step ran.
	RuntimeTag = "berth-runtime"
	// InstallPath writes a file from stdin with its final mode
	// (coreutils install, in every distribution E2B's builder accepts):
	// the bootstrap credential travels in stdin only, never in argv or
	// envs, and lands in the runtime user's 0700 home.
	InstallPath = "/usr/bin/install"
	// installLifetime bounds a file-writing process in envd.
	installLifetime = time.Minute
)

// RuntimeCommand is the Runtime's start command, the Docker adapter's.
func RuntimeCommand() []string {
	return []string{runtimebootstrap.BinaryPath, "connect", "--profile", "default", "--bootstrap-file", runtimebootstrap.Path}
}

// InstallCommand is the argv that writes stdin to path with mode.
func InstallCommand(mode, path string) []string {
	return []string{InstallPath, "-m", mode, "/dev/stdin", path}
}

var (
	errCreateNotSent = errdefs.Refuse(errdefs.ErrFailedPrecondition, "vendor_unreachable",
		"E2B could not be reached: the create request was never written, nothing was created; retry later")
	errUnsettledCreate = fmt.Errorf("e2b create: an earlier create of the allocation is not settled: %w", errdefs.ErrExists)
)

// Create lists the allocation's metadata, refuses a duplicate or a
// foreign sandbox, records the create receipt, creates once and delivers
// the bootstrap. It runs detached (sandbox.Detach): a caller that gives
// up gets an unknown outcome while the HTTP exchange keeps the
// Reference's turn until it ended, so the next call about the Reference
// observes its result. Only evidence settles it (doc.go).
func (p *Provider) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpCreate); err != nil {
		return sandbox.Info{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	bootstrap, err := runtimebootstrap.Encode(req.Bootstrap)
	if err != nil {
		return sandbox.Info{}, errdefs.Invalid("bootstrap", "invalid runtime bootstrap file")
	}
	ref := req.Reference
	if p.closed.Load() || p.c == nil {
		return receipt(ref), errClosed
	}
	info, err := sandbox.Detach(p.fence, ctx, ref, CreateGrace, func(nctx context.Context) (sandbox.Info, error) {
		return p.create(nctx, req, bootstrap)
	})
	switch {
	case errors.Is(err, sandbox.ErrCallFenced):
		return receipt(ref), err
	case isContext(err):
		p.log.Info("e2b create outcome unknown: the caller gave up", "allocation", ref.AllocationID)
		return sandbox.Info{}, errCreateUnknown
	}
	return info, err
}

func (p *Provider) create(ctx context.Context, req sandbox.CreateRequest, bootstrap []byte) (sandbox.Info, error) {
	ref := req.Reference
	owned, foreign, err := p.find(ctx, ref)
	switch s := statusOf(err); {
	case s == 401 || s == 403:
		return receipt(ref), errCredentialRejected
	case err != nil:
		return sandbox.Info{}, errCreateNotRead
	case foreign:
		return receipt(ref), errForeign
	case len(owned) > 0:
		return sandbox.Info{}, errExists
	}
	if _, ok, err := p.readReceipt(ref); err != nil || ok {
		return sandbox.Info{}, errUnsettledCreate
	}
	if err := p.writeReceipt(ref, p.now()); err != nil {
		return receipt(ref), errReceipt
	}
	s, err := p.c.create(ctx, p.template, p.lease, Metadata(p.installation, ref))
	if err != nil {
		return p.createFailed(ref, err)
	}
	if !idPattern.MatchString(s.SandboxID) || s.EnvdAccessToken == "" {
		p.log.Warn("e2b create answer unusable: the creation stays unknown", "allocation", ref.AllocationID)
		return sandbox.Info{Reference: ref}, errCreateAnswer
	}
	// A complete answer: the sandbox exists and is listed by its metadata.
	_ = p.dropReceipt(ref)
	partial := sandbox.Info{Reference: ref, ProviderID: s.SandboxID, State: sandbox.StateCreated}
	if err := p.bootstrap(ctx, p.c.envdFor(s), bootstrap, req.CoreCA); err != nil {
		p.log.Warn("e2b bootstrap failed", "allocation", ref.AllocationID)
		return partial, errBootstrap
	}
	return sandbox.Info{Reference: ref, ProviderID: s.SandboxID, State: sandbox.StateRunning,
		BootstrapComplete: true, CreateSettled: true}, nil
}

// createFailed maps a create POST without a 2xx answer. A complete 4xx
// answer and a request never written settle absence (the receipt goes);
// anything else is unknown and the receipt stays.
func (p *Provider) createFailed(ref sandbox.Reference, err error) (sandbox.Info, error) {
	var out error
	switch s := statusOf(err); {
	case s == 401 || s == 403:
		out = errCredentialRejected
	case s == 429:
		out = errRateLimited
	case s >= 400 && s <= 499:
		out = errCreateRefused
	case s == 0 && notWritten(err):
		out = errCreateNotSent
	default:
		p.log.Info("e2b create outcome unknown: no complete answer", "allocation", ref.AllocationID)
		return sandbox.Info{}, errCreateUnknown
	}
	if p.dropReceipt(ref) != nil {
		return sandbox.Info{}, out
	}
	return receipt(ref), out
}

// bootstrap writes the bootstrap file (0600) and the Core CA (0644)
// through envd, their bytes in stdin only, then starts the Runtime,
// tagged RuntimeTag and without a lifetime, and returns once envd
// reported its pid (the stream is then closed; the process goes on).
func (p *Provider) bootstrap(ctx context.Context, e envd, bootstrap, ca []byte) error {
	if err := writeFile(ctx, e, "0600", runtimebootstrap.Path, bootstrap); err != nil {
		return err
	}
	if len(ca) > 0 {
		if err := writeFile(ctx, e, "0644", runtimebootstrap.CAPathBeside(runtimebootstrap.Path), ca); err != nil {
			return err
		}
	}
	argv := RuntimeCommand()
	st, err := e.start(ctx, startJSON{
		Process: processJSON{Cmd: argv[0], Args: argv[1:], Envs: map[string]string{}},
		Tag:     RuntimeTag,
	}, 0)
	if err != nil {
		return err
	}
	defer st.close()
	ev, err := st.next()
	if err != nil || ev.Event.Start == nil {
		return errStreamEnded
	}
	return nil
}

// writeFile runs InstallCommand(mode, path) with data as its stdin and
// waits for its exit status 0.
func writeFile(ctx context.Context, e envd, mode, path string, data []byte) error {
	argv := InstallCommand(mode, path)
	st, err := e.start(ctx, startJSON{
		Process: processJSON{Cmd: argv[0], Args: argv[1:], Envs: map[string]string{}},
		Stdin:   true,
	}, installLifetime)
	if err != nil {
		return err
	}
	defer st.close()
	ev, err := st.next()
	if err != nil || ev.Event.Start == nil {
		return errStreamEnded
	}
	sel := selectorJSON{Pid: ev.Event.Start.Pid}
	if err := e.sendInput(ctx, sel, data); err != nil {
		return err
	}
	if err := e.closeStdin(ctx, sel); err != nil {
		return err
	}
	for {
		ev, err := st.next()
		if err != nil {
			return err
		}
		if end := ev.Event.End; end != nil {
			if !end.Exited || end.ExitCode != 0 {
				return errors.New("e2b: file write failed in the sandbox")
			}
			return nil
		}
	}
}
