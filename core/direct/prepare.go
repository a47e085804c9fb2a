package direct

import (
	"context"

	"berth.dev/core/deployment"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

// candidateNotReady refuses a direct candidate whose adapter could not be
// built or probed, naming only the fixed code of why. Nothing was
// committed.
func candidateNotReady(code string) error {
	return errdefs.Refuse(errdefs.ErrFailedPrecondition, "deployment_candidate_not_ready",
		"candidate not ready ("+code+"): fix its configuration or key; nothing was committed")
}

// errPublicOriginRequired refuses a direct candidate whose Runtimes must
// dial Core's public origin while this Core serves no Runtime gateway.
var errPublicOriginRequired error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "public_origin_required",
	"this provider's sandboxes connect back to Core's public URL, but Core serves no Runtime gateway: start berth-core with --runtime-listen; nothing was committed")

// Prepare builds and probes a direct candidate before its commit
// (deployment.DirectPreparer), with the candidate's own credential, so a
// key the vendor rejects or an unreachable endpoint is refused before
// anything is written. The built adapter is kept for the commit: Publish
// installs it as the generation's, Discard closes it.
func (s *Set) Prepare(ctx context.Context, c deployment.DirectCandidate) (deployment.PreparedDirect, error) {
	reg, err := s.cfg.Registry.Lookup(c.Kind)
	if err != nil {
		return nil, err
	}
	if reg.Configuration.Requirements().PublicOrigin == sandbox.Required && !s.cfg.RuntimeGateway {
		return nil, errPublicOriginRequired
	}
	built, err := s.buildWith(ctx, c.Kind, c.Generation, c.Configuration, c.Configuration.Secret, c.Specification)
	if err != nil {
		return nil, candidateNotReady(diagnostic(err, CodeBuildFailed))
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if err := built.Probe(pctx); err != nil {
		s.closeLater(built)
		code := sandbox.ProbeCode(err)
		if !validCode(code) {
			code = diagnostic(err, CodeProbeFailed)
		}
		return nil, candidateNotReady(code)
	}
	return &prepared{set: s, generation: c.Generation, kind: c.Kind, built: built}, nil
}

// prepared is a built, probed candidate awaiting its commit.
type prepared struct {
	set        *Set
	generation uint64
	kind       string
	built      providers.DirectBuilt
}

// Publish installs the adapter as its generation's; the next pass probes
// and records it (the commit's events.Generation wakes it). It cannot
// fail: a Set that closed, or already built the generation meanwhile,
// closes this one instead.
func (p *prepared) Publish() {
	s := p.set
	s.mu.Lock()
	if !s.closed && s.gens[p.generation] == nil {
		s.gens[p.generation] = &served{built: p.built, kind: p.kind, ready: true}
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	p.Discard()
}

// Discard closes the adapter in the background: its commit did not
// happen.
func (p *prepared) Discard() { p.set.closeLater(p.built) }
