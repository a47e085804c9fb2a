package direct

import (
	"context"
	"fmt"

	"berth.dev/core/deployment"
	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

// errCredentialBusy refuses a key replacement while calls made with the
// old key are still running past the bound: nothing was committed.
var errCredentialBusy error = errdefs.Refuse(errdefs.ErrFenced, "deployment_credential_busy",
	"calls made with the current key are still running: nothing was committed; send the replacement again")

// credentialNotVerified refuses a key replacement whose new key does not
// reach count allocations of generation (or is refused for it): nothing
// was committed. Only numbers are named, never a key or a native id.
func credentialNotVerified(generation uint64, count int) error {
	return errdefs.Refuse(errdefs.ErrFailedPrecondition, "deployment_credential_not_verified",
		fmt.Sprintf("the new key does not reach %d sandbox(es) of generation %d: nothing was committed; use a key of the same vendor account", count, generation))
}

// candidate is an adapter built with the new key for one generation.
type candidate struct {
	generation uint64
	built      providers.DirectBuilt
}

// Rekey replaces the credential of a direct provider
// (deployment.DirectPreparer): the guide's "a direct adapter with a
// credential verifies all retained generations and allocation references
// before a key is replaced". It runs inside the direct lane's drain gate,
// so the lane's worker sends nothing meanwhile, and:
//
//  1. excludes the fence of every adapter of the kind, waiting (bounded
//     by CloseTimeout) for their calls, those of callers that gave up
//     included; past the bound it readmits them and refuses
//     (deployment_credential_busy);
//  2. builds and probes the new generation's adapter with the new key, and
//     for every generation of the kind that holds anything an adapter with
//     its own stored selectors and the new key, which must see every
//     allocation still owning something under the same native id and
//     reach the same backend (deployment_credential_not_verified);
//  3. commits (r.Commit) the new generation with those generations pointed
//     at its credential;
//  4. then, with nothing that can fail, serves them through the new
//     adapters and closes the old ones, whose fences are empty.
//
// Any refusal before the commit discards the new adapters and readmits
// the old ones: nothing changed.
func (s *Set) Rekey(ctx context.Context, r deployment.Rekey) error {
	s.passing.Lock()
	defer s.passing.Unlock()
	kind := r.Candidate.Kind
	targets, err := s.cfg.Store.HeldDirectGenerations(ctx, kind)
	if err != nil {
		return err
	}
	readmit, err := s.exclude(ctx, kind)
	if err != nil {
		return err
	}
	var built []candidate
	discard := func() {
		for _, c := range built {
			s.closeLater(c.built)
		}
		readmit()
	}
	next, err := s.Prepare(ctx, r.Candidate)
	if err != nil {
		readmit()
		return err
	}
	for _, g := range targets {
		c, err := s.verify(ctx, g, r.Candidate.Configuration.Secret)
		if c.built.Close != nil {
			built = append(built, c)
		}
		if err != nil {
			next.Discard()
			discard()
			return err
		}
	}
	if err := r.Commit(targets); err != nil {
		next.Discard()
		discard()
		return err
	}
	next.Publish()
	s.swap(kind, r.Candidate.Generation, built)
	return nil
}

// exclude excludes the fences of every adapter of kind, bounded by
// CloseTimeout, and returns their readmission.
func (s *Set) exclude(ctx context.Context, kind string) (readmit func(), err error) {
	s.mu.Lock()
	var fences []*sandbox.CallFence
	for _, sv := range s.gens {
		if sv.kind == kind {
			fences = append(fences, sv.built.Fence)
		}
	}
	s.mu.Unlock()
	ectx, cancel := context.WithTimeout(ctx, s.cfg.CloseTimeout)
	defer cancel()
	var readmits []func()
	readmit = func() {
		for _, f := range readmits {
			f()
		}
	}
	for _, f := range fences {
		ra, err := f.Exclude(ectx)
		if err != nil {
			readmit()
			return nil, errCredentialBusy
		}
		readmits = append(readmits, ra)
	}
	return readmit, nil
}

// verify builds generation's adapter with its stored selectors and the
// new credential, probes it, and checks that it reaches the backend the
// generation was served with and sees every allocation of the generation
// still owning something and last observed running, under its recorded
// native id.
func (s *Set) verify(ctx context.Context, generation uint64, secret sandbox.Credential) (candidate, error) {
	g, err := s.cfg.Store.GetGeneration(ctx, generation)
	if err != nil {
		return candidate{}, err
	}
	b, err := s.buildWith(ctx, g.ProviderKind, generation, sandbox.EncodedConfiguration{Public: g.PublicConfig, Observations: g.Observations}, secret, g.Specification)
	if err != nil {
		return candidate{}, credentialNotVerified(generation, 0)
	}
	c := candidate{generation: generation, built: b}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if err := b.Probe(pctx); err != nil {
		return c, credentialNotVerified(generation, 0)
	}
	prev, err := s.cfg.Store.DirectReadiness(ctx, int64(generation))
	if err != nil && !errdefs.IsNotFound(err) {
		return c, err
	}
	allocs, err := s.cfg.Store.DirectAllocationsOf(ctx, generation)
	if err != nil {
		return c, err
	}
	if prev.BackendFingerprint != "" && prev.BackendFingerprint != b.BackendFingerprint {
		// Another vendor namespace (another account's key): it owns none
		// of them, and a retained allocation is never repointed there.
		return c, credentialNotVerified(generation, len(allocs))
	}
	missing := 0
	for _, a := range allocs {
		if a.Observation.Compute != "" && a.Observation.Compute != store.ObservedRunning {
			// Last observed stopped or missing (an expired lease): what the
			// new key cannot see is not the key's doing.
			continue
		}
		ref := a.Reference()
		info, err := b.Provider.GetInfo(pctx, ref)
		if err != nil || info.Reference != ref || info.State == sandbox.StateAbsent || info.ProviderID != a.NativeID() {
			missing++
		}
	}
	if missing > 0 {
		return c, credentialNotVerified(generation, missing)
	}
	return c, nil
}

// swap serves each rekeyed generation through its new adapter and closes
// every old adapter of kind (their fences are excluded and empty); next,
// the new generation, keeps the adapter its Publish installed.
func (s *Set) swap(kind string, next uint64, rekeyed []candidate) {
	s.mu.Lock()
	var old []providers.DirectBuilt
	for g, sv := range s.gens {
		if sv.kind != kind || g == next {
			continue
		}
		old = append(old, sv.built)
		delete(s.gens, g)
	}
	for _, c := range rekeyed {
		s.gens[c.generation] = &served{built: c.built, kind: kind, ready: true}
	}
	s.mu.Unlock()
	for _, b := range old {
		s.closeLater(b)
	}
}

// closeLater closes b in the background (closeAdapter), or at once once
// the Set is closed, so no background close starts after Close waited.
func (s *Set) closeLater(b providers.DirectBuilt) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.closeAdapter(b)
		return
	}
	s.closing.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.closing.Done()
		s.closeAdapter(b)
	}()
}
