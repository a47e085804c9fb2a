package microsandbox

import (
	"context"
	"fmt"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// GetInfo observes ref's sandbox without changing it.
func (p *Provider) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpGetInfo); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	rec, err := p.inspectOwned(ctx, ref)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("get info: %w", err)
	}
	info, err := p.info(ref, rec)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("get info: %w", err)
	}
	return info, nil
}

// Renew only observes: msb has no lease, and Renew never starts a stopped
// sandbox.
func (p *Provider) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpRenew); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	rec, err := p.inspectOwned(ctx, ref)
	if err == nil {
		var info sandbox.Info
		if info, err = p.info(ref, rec); err == nil {
			return info, nil
		}
	}
	if errdefs.IsObservationUnavailable(err) {
		// Classified like any lease mutation without an answer (the node
		// transport does the same).
		err = errdefs.ErrComputeUnconfirmed
	}
	return sandbox.Info{}, fmt.Errorf("renew: %w", err)
}

// Kill removes ref's sandbox and host directories and confirms both
// absent. It reads the name first: a foreign sandbox there is never
// touched, and with no sandbox of ref's anywhere Kill only removes ref's
// host directories (ErrOwnership when one of ref's exists beside it).
// The removal selects by every ownership label, never by name, and its
// success is confirmed by listing by the labels again. A Create of this
// process for ref is waited for (hold): once its msb child has exited no
// record of that attempt can appear any more (doc.go), so a Kill that
// finds nothing has settled it. Repeated Kills succeed.
func (p *Provider) Kill(ctx context.Context, req sandbox.KillRequest) error {
	if err := p.ops.Check(sandbox.OpKill); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	ref := req.Reference
	name := p.Name(ref)
	if _, err := p.dirsOf(name); err != nil {
		return err
	}
	release, err := p.hold(ctx, name)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	defer release()
	foreign, named := false, false
	switch _, err := p.inspectOwned(ctx, ref); {
	case err == nil:
		named = true
	case errdefs.IsNotFound(err):
	case errdefs.IsOwnership(err):
		foreign = true
	default:
		return fmt.Errorf("kill: inspect: %w", errdefs.ErrComputeUnconfirmed)
	}
	owned, err := p.listOwned(ctx, ref)
	if err != nil {
		return fmt.Errorf("kill: list: %w", errdefs.ErrComputeUnconfirmed)
	}
	switch {
	case foreign && len(owned) > 0:
		return fmt.Errorf("kill: %w", errdefs.ErrOwnership)
	case named && len(owned) == 0:
		// msb contradicts itself: the label selector would not remove
		// what inspect showed.
		return fmt.Errorf("kill: list: %w", errdefs.ErrComputeUnconfirmed)
	}
	if len(owned) > 0 {
		if err := p.removeOwned(ctx, ref); err != nil {
			return fmt.Errorf("kill: %w", err)
		}
		switch left, err := p.listOwned(ctx, ref); {
		case err != nil:
			return fmt.Errorf("kill: confirm absence: %w", errdefs.ErrComputeUnconfirmed)
		case len(left) > 0:
			return fmt.Errorf("kill: sandbox still present: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	if err := p.removeHost(name); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	return nil
}
