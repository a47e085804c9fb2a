package e2b

import (
	"context"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

var (
	errRenewNotRunning = errdefs.Refuse(errdefs.ErrFailedPrecondition, "sandbox_not_running",
		"the allocation's E2B sandbox is paused or being removed: its lease was not extended (it is never resumed)")
	errLeaseAtMaximum = errdefs.Refuse(errdefs.ErrFailedPrecondition, "lease_at_maximum",
		"E2B refused to extend the lease (the plan's maximum sandbox lifetime is reached)")
)

// GetInfo lists the allocation's metadata and, for its one owned running
// sandbox, reads it by the listed id (metadata checked again; the envd
// token comes from this read) and asks envd whether the Runtime process
// runs (the bootstrap's evidence). It never resumes a paused sandbox,
// never calls connect and never calls envd for a paused one. With
// nothing listed it applies the settlement rule (receipts.go).
func (p *Provider) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpGetInfo); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	var info sandbox.Info
	err := p.fenced(ctx, ref, func(ctx context.Context) error {
		owned, foreign, err := p.find(ctx, ref)
		switch {
		case err != nil:
			return readErr(err)
		case foreign:
			return errForeign
		case len(owned) > 1:
			return errDuplicate
		case len(owned) == 0:
			var serr error
			info, serr = p.settle(ref)
			return serr
		}
		// Listed: a create of ref committed, so its receipt is settled.
		_ = p.dropReceipt(ref)
		s := owned[0]
		if state(s) == sandbox.StatePaused {
			info = sandbox.Info{Reference: ref, ProviderID: s.SandboxID, State: sandbox.StatePaused,
				CreateSettled: true, LeaseExpiry: s.EndAt}
			return nil
		}
		d, err := p.detail(ctx, ref, s.SandboxID)
		if err != nil {
			return err
		}
		if state(d) == sandbox.StatePaused {
			info = sandbox.Info{Reference: ref, ProviderID: d.SandboxID, State: sandbox.StatePaused,
				CreateSettled: true, LeaseExpiry: d.EndAt}
			return nil
		}
		up, err := p.c.envdFor(d).running(ctx, RuntimeTag)
		if err != nil {
			return errUnavailable
		}
		info = sandbox.Info{Reference: ref, ProviderID: d.SandboxID, State: sandbox.StateRunning,
			BootstrapComplete: up, CreateSettled: true, LeaseExpiry: d.EndAt}
		return nil
	})
	if err != nil {
		if isContext(err) {
			return sandbox.Info{}, errUnavailable
		}
		return sandbox.Info{}, err
	}
	return info, nil
}

// Renew sets the lease of the allocation's one owned running sandbox to
// the configured lease from now (E2B's timeout replaces endAt) and reads
// the new endAt back. It never revives: nothing listed is ErrNotFound, a
// paused sandbox is only observed.
func (p *Provider) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpRenew); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	var info sandbox.Info
	err := p.fenced(ctx, ref, func(ctx context.Context) error {
		s, err := p.one(ctx, ref)
		if err != nil {
			return err
		}
		if state(s) == sandbox.StatePaused {
			info = sandbox.Info{Reference: ref, ProviderID: s.SandboxID, State: sandbox.StatePaused,
				CreateSettled: true, LeaseExpiry: s.EndAt}
			return nil
		}
		err = p.c.setTimeout(ctx, s.SandboxID, p.lease)
		switch st := statusOf(err); {
		case st == 401 || st == 403:
			return errCredentialRejected
		case st == 404:
			return errNotFound
		case st == 409:
			return errRenewNotRunning
		case st == 400:
			return errLeaseAtMaximum
		case err != nil:
			return errRenewUnknown
		}
		d, err := p.detail(ctx, ref, s.SandboxID)
		if err != nil {
			return errRenewUnknown
		}
		info = sandbox.Info{Reference: ref, ProviderID: d.SandboxID, State: state(d),
			CreateSettled: true, LeaseExpiry: d.EndAt}
		return nil
	})
	if err != nil {
		if isContext(err) {
			return sandbox.Info{}, errRenewUnknown
		}
		return sandbox.Info{}, err
	}
	return info, nil
}

// Kill removes every owned sandbox of the allocation (DELETE by the id
// its listing gave) and confirms with a second listing that none of them
// is left. Sandboxes with the allocation's id and another owner's
// metadata are never touched and do not block the owned cleanup. It runs
// detached like Create. Nothing owned listed is confirmed absence.
func (p *Provider) Kill(ctx context.Context, req sandbox.KillRequest) error {
	if err := p.ops.Check(sandbox.OpKill); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	ref := req.Reference
	if p.closed.Load() || p.c == nil {
		return errClosed
	}
	_, err := sandbox.Detach(p.fence, ctx, ref, CreateGrace, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.kill(ctx, ref)
	})
	if isContext(err) {
		return errKillUnknown
	}
	return err
}

func (p *Provider) kill(ctx context.Context, ref sandbox.Reference) error {
	owned, _, err := p.find(ctx, ref)
	switch s := statusOf(err); {
	case s == 401 || s == 403:
		return errCredentialRejected
	case err != nil:
		return errKillUnknown
	}
	for _, s := range owned {
		err := p.c.kill(ctx, s.SandboxID)
		switch st := statusOf(err); {
		case st == 401 || st == 403:
			return errCredentialRejected
		case st == 404, err == nil:
			// Removed, or gone already: the listing confirms.
		default:
			return errKillUnknown
		}
	}
	left, _, err := p.find(ctx, ref)
	switch {
	case err != nil:
		return errKillUnknown
	case len(left) > 0:
		return errKillUnknown
	}
	return nil
}
