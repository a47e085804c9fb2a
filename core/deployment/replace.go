package deployment

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

// The parts of a candidate a replacement may set (Fields); every part it
// does not set is inherited from the current generation.
const (
	FieldProviderKind  = "provider.kind"
	FieldConfiguration = "configuration.public"
	FieldCredential    = "configuration.credential"
	FieldCPUMillis     = "specification.cpu_millis"
	FieldMemoryBytes   = "specification.memory_bytes"
	FieldDiskBytes     = "specification.disk_bytes"
	FieldMaxActive     = "specification.max_active"
	FieldMaxRetained   = "specification.max_retained"
	FieldSuspension    = "specification.suspension"
)

// fields is every part, in the order refusals name them.
var fields = []string{FieldProviderKind, FieldConfiguration, FieldCredential, FieldCPUMillis,
	FieldMemoryBytes, FieldDiskBytes, FieldMaxActive, FieldMaxRetained, FieldSuspension}

// Fields are the parts of a candidate that are set. Nil sets every part:
// the candidate is complete and nothing is inherited.
type Fields []string

// has reports whether f sets field.
func (f Fields) has(field string) bool { return f == nil || slices.Contains(f, field) }

// validate refuses a part that is not one of the known ones.
func (f Fields) validate() error {
	for _, p := range f {
		if !slices.Contains(fields, p) {
			return errdefs.Invalid("update_mask", "names an unknown field")
		}
	}
	return nil
}

// errNotCommitted refuses a replacement before the first commit.
var errNotCommitted = errdefs.Refuse(errdefs.ErrFailedPrecondition, "deployment_not_committed",
	"nothing is committed to replace: commit the initial deployment with CommitDeployment")

// Replacement is what ReplaceDeployment did.
type Replacement struct {
	Deployment Deployment
	// Changed is false when the candidate equals the current generation
	// (nothing was committed), also for a retry whose replacement already
	// committed.
	Changed bool
	// RetiredNodes are the nodes retired with the commit (a replacement
	// with another provider kind), RevokedTokens the enrollment tokens
	// revoked with it.
	RetiredNodes  []uuid.UUID
	RevokedTokens int64
	// AdmissionPause is how long admission of new Sessions was paused:
	// from the commit's lock of the deployment row to its commit (the
	// admissions in flight finished first, LockWait).
	AdmissionPause, LockWait time.Duration
}

// prepareReplacement prepares c as a replacement of cur: every part set
// does not set is inherited from cur; a suspension policy set is resolved
// as a first commit's (suspensionOf: no policy is the registered
// defaults of the replacement's kind). For cur's provider kind the adapter
// owns the configuration's inheritance (providers.Registry.ResolveChange
// of cur's configuration, with its credential, and the parts set sets:
// the public configuration, the credential); a candidate of another kind
// inherits no configuration or credential and is normalized like a first
// commit. The specification is inherited field by field. It does no I/O
// besides opening cur's credential.
func (s *Service) prepareReplacement(c Candidate, set Fields, cur store.Generation) (prepared, error) {
	if err := set.validate(); err != nil {
		return prepared{}, err
	}
	kind := c.ProviderKind
	if !set.has(FieldProviderKind) {
		kind = cur.ProviderKind
	}
	spec, cs := c.Specification, cur.Specification
	if !set.has(FieldCPUMillis) {
		spec.Resources.CPUMillis = cs.Resources.CPUMillis
	}
	if !set.has(FieldMemoryBytes) {
		spec.Resources.MemoryBytes = cs.Resources.MemoryBytes
	}
	if !set.has(FieldDiskBytes) {
		spec.Resources.DiskBytes = cs.Resources.DiskBytes
	}
	if !set.has(FieldMaxActive) {
		spec.MaxActive = cs.MaxActive
	}
	if !set.has(FieldMaxRetained) {
		spec.MaxRetained = cs.MaxRetained
	}
	reg, err := s.lookup(kind)
	if err != nil {
		return prepared{}, err
	}
	if !set.has(FieldSuspension) {
		spec.Suspension = cs.Suspension
	} else if spec.Suspension, err = suspensionOf(reg, c); err != nil {
		return prepared{}, err
	}
	if err := validateSelection(reg, spec); err != nil {
		return prepared{}, err
	}
	var enc sandbox.EncodedConfiguration
	if kind == cur.ProviderKind {
		stored, err := OpenCredential(s.key, s.installationID, cur)
		if err != nil {
			return prepared{}, fmt.Errorf("open the current deployment credential: %w", err)
		}
		current := sandbox.EncodedConfiguration{Public: cur.PublicConfig, Observations: cur.Observations}
		if stored != nil {
			current.Secret = sandbox.NewCredential(stored)
		}
		var change sandbox.ConfigurationInput
		if set.has(FieldConfiguration) {
			change.Public = c.Public
		}
		if set.has(FieldCredential) {
			change.Credential = c.Credential
		}
		enc, err = s.registry.ResolveChange(kind, current, change)
		if err != nil {
			return prepared{}, err
		}
	} else {
		enc, err = s.registry.Normalize(kind, sandbox.ConfigurationInput{Public: c.Public, Credential: c.Credential})
		if err != nil {
			return prepared{}, err
		}
	}
	return prepared{kind: kind, reg: reg, enc: enc, spec: spec}, nil
}

// PreviewReplacement resolves c against the current generation (the parts
// set does not set are inherited), prepares and validates it and compares
// it with the current generation. It writes nothing. Before the first
// commit it is errNotCommitted.
func (s *Service) PreviewReplacement(ctx context.Context, c Candidate, set Fields) (Preview, error) {
	cur, p, d, err := s.replacing(ctx, c, set)
	if err != nil {
		return Preview{}, err
	}
	if d.same() {
		desc, err := s.describe(cur)
		if err != nil {
			return Preview{}, err
		}
		return Preview{Deployment: desc, ExpectedGeneration: cur.Generation}, nil
	}
	return Preview{Deployment: p.deployment(cur.Generation + 1), Changed: true, ExpectedGeneration: cur.Generation}, nil
}

// Replace resolves c against the current generation like
// PreviewReplacement, prepares and validates it again (it never trusts a
// preview), and commits it as generation expected+1 in one transaction
// with, for another provider kind, the retirement of every enabled node
// and the revocation of every unused enrollment token
// (store.ReplaceGeneration). Nodes of the same kind keep their identities:
// Core publishes the new generation to them beside the ones their
// allocations hold, so running Sessions keep their generation (and
// resources) and new Sessions get the new one. A candidate equal to the
// current generation commits nothing (also a retry whose replacement
// already committed: expected is then the generation before the current
// one); a stale expected generation is refused (errGenerationMoved), and
// so is a credential change for the same kind
// (errCredentialReplacementUnsupported). After the commit the nodes are
// told at once (OnCommit); nothing after the commit can fail.
func (s *Service) Replace(ctx context.Context, c Candidate, set Fields, expected uint64) (Replacement, error) {
	if expected >= math.MaxInt64 {
		return Replacement{}, errdefs.Invalid("expected_generation", "out of range")
	}
	cur, p, d, err := s.replacing(ctx, c, set)
	if err != nil {
		return Replacement{}, err
	}
	switch {
	case d.same() && (cur.Generation == expected || cur.Generation == expected+1):
		// Nothing to change, or the retry of a replacement that committed.
		desc, err := s.describeWithSwitch(ctx, cur)
		return Replacement{Deployment: desc}, err
	case cur.Generation != expected:
		return Replacement{}, fmt.Errorf("replace deployment: %w", errGenerationMoved)
	}
	next, err := s.sealed(p, expected+1)
	if err != nil {
		return Replacement{}, err
	}
	r, err := s.store.ReplaceGeneration(ctx, expected, next, store.Replacement{RetireNodes: p.kind != cur.ProviderKind})
	if errdefs.IsFailedPrecondition(err) {
		return Replacement{}, fmt.Errorf("replace deployment: %w", errGenerationMoved)
	}
	if err != nil {
		return Replacement{}, err
	}
	s.committed()
	desc, err := s.describeWithSwitch(ctx, r.Generation)
	if err != nil {
		return Replacement{}, err
	}
	return Replacement{
		Deployment: desc, Changed: true, RetiredNodes: r.RetiredNodes, RevokedTokens: r.RevokedTokens,
		AdmissionPause: r.Locked, LockWait: r.LockWait,
	}, nil
}

// replacing reads the current generation and prepares c as its
// replacement (prepareReplacement), compared with it; a same-kind
// credential change is refused. Before the first commit it is
// errNotCommitted. Preview and Replace share it, so both decide alike.
func (s *Service) replacing(ctx context.Context, c Candidate, set Fields) (store.Generation, prepared, sameness, error) {
	cur, ok, err := s.current(ctx)
	if err != nil {
		return store.Generation{}, prepared{}, sameness{}, err
	}
	if !ok {
		return store.Generation{}, prepared{}, sameness{}, fmt.Errorf("replace deployment: %w", errNotCommitted)
	}
	p, err := s.prepareReplacement(c, set, cur)
	if err != nil {
		return store.Generation{}, prepared{}, sameness{}, err
	}
	d, err := s.compare(p, cur)
	if err != nil {
		return store.Generation{}, prepared{}, sameness{}, err
	}
	if err := s.refuseCredentialChange(p, cur, d); err != nil {
		return store.Generation{}, prepared{}, sameness{}, err
	}
	return cur, p, d, nil
}

// refuseCredentialChange refuses a candidate of the current provider kind
// that brings another credential than the current one: replacing a key
// must verify every retained generation first, which is not built. A
// candidate of another kind brings its own. d is p compared with cur: its
// credential verdict is reused when compare made one (an equal
// selection), so the stored credential is opened once.
func (s *Service) refuseCredentialChange(p prepared, cur store.Generation, d sameness) error {
	if p.kind != cur.ProviderKind {
		return nil
	}
	same := d.credential
	if !d.selection {
		var err error
		if same, err = s.sameCredential(p, cur); err != nil {
			return err
		}
	}
	if !same {
		return fmt.Errorf("replace deployment: %w", errCredentialReplacementUnsupported)
	}
	return nil
}
