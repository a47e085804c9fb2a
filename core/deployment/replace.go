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
	"berth.dev/sandbox/providers"

	"berth.dev/core/events"
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

// RetireGate runs retire, the commit that retires nodes, through the
// lifecycle drain gate (Core passes lifecycle.Coordinator.Gate): it
// drains the lifecycle workers of nodes between operations within its
// bound, runs retire while none of them runs, and starts new workers.
// When the drain passes its bound it must not run retire and returns
// ErrReplaceUndrained.
type RetireGate func(ctx context.Context, nodes []uuid.UUID, retire func() error) error

// ErrReplaceUndrained refuses a replacement with another provider kind
// whose nodes' lifecycle workers did not all reach the end of their
// operation in flight within the drain bound: nothing was committed or
// cancelled, and Core closed admission (an owner failure) until it
// restarts. A retry before the restart is refused the same way (the
// drain barrier stays closed).
var ErrReplaceUndrained error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "owner_failure",
	"deployment not replaced: the lifecycle workers of the nodes it retires did not drain in time and Core closed admission: restart berth-core, then replace the deployment again")

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
	seen, p, d, err := s.replacing(ctx, c, set)
	if err != nil {
		return Preview{}, err
	}
	cur, _ := seen.Current()
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
// (store.ReplaceGeneration); that commit runs through the drain gate of
// the retired nodes' lifecycle workers (retiring), and a drain past its
// bound refuses the replacement (ErrReplaceUndrained: nothing committed,
// nothing cancelled, admission closed). Nodes of the same kind keep their
// identities: Core publishes the new generation to them beside the ones
// their allocations hold, so running Sessions keep their generation (and
// resources) and new Sessions get the new one. A candidate equal to the
// current generation commits nothing (also a retry whose replacement
// already committed: expected is then the generation before the current
// one); a stale expected generation is refused (errGenerationMoved), and
// so is a credential change for the same kind
// (errCredentialReplacementUnsupported), and one that would retire a node
// enabled since the drain (store.ErrNodesMoved). After the commit the
// nodes are told at once (events.Generation); nothing after the commit can fail.
// prov is who decided (audit.From of the admin call): the commit records
// deployment.replace, and node.retire for each node it retires, in its
// own transaction.
func (s *Service) Replace(ctx context.Context, c Candidate, set Fields, expected uint64, prov store.Provenance) (Replacement, error) {
	if expected >= math.MaxInt64 {
		return Replacement{}, errdefs.Invalid("expected_generation", "out of range")
	}
	seen, p, d, err := s.replacing(ctx, c, set)
	if err != nil {
		return Replacement{}, err
	}
	cur, _ := seen.Current()
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
	eventID, err := uuid.NewRandom()
	if err != nil {
		return Replacement{}, err
	}
	if d.rekey {
		return s.rekey(ctx, seen, p, next, expected+1, prov, eventID)
	}
	pd, err := s.prepareDirect(ctx, p, expected+1)
	if err != nil {
		return Replacement{}, err
	}
	var r store.Replaced
	commit := func(retire store.Replacement) error {
		var err error
		r, err = s.store.ReplaceGeneration(ctx, seen, next, retire, prov, eventID)
		if errdefs.IsFailedPrecondition(err) {
			return fmt.Errorf("replace deployment: %w", errGenerationMoved)
		}
		return err
	}
	if p.kind == cur.ProviderKind {
		err = commit(store.Replacement{})
	} else {
		err = s.retiring(ctx, commit)
	}
	if err != nil {
		pd.Discard()
		return Replacement{}, err
	}
	pd.Publish()
	s.opts.Events.Publish(events.Event{Kind: events.Generation})
	desc, err := s.describeWithSwitch(ctx, r.Generation)
	if err != nil {
		return Replacement{}, err
	}
	return Replacement{
		Deployment: desc, Changed: true, RetiredNodes: r.RetiredNodes, RevokedTokens: r.RevokedTokens,
		AdmissionPause: r.Locked, LockWait: r.LockWait,
	}, nil
}

// retiring commits a replacement with another provider kind, which
// retires every enabled node: it reads the enabled nodes and commits
// through the drain gate (Options.Gate) of their lifecycle workers, so
// no lifecycle operation on a node begun before the retirement is still
// in flight when it commits, and nothing in flight is cancelled. The
// commit retires exactly the nodes drained: a node enabled meanwhile
// refuses it (store.ErrNodesMoved). The drain holds no transaction.
func (s *Service) retiring(ctx context.Context, commit func(store.Replacement) error) error {
	nodes, err := s.store.EnabledNodes(ctx)
	if err != nil {
		return err
	}
	retire := func() error { return commit(store.Replacement{RetireNodes: true, Drained: nodes}) }
	if s.opts.Gate == nil || len(nodes) == 0 {
		return retire()
	}
	return s.opts.Gate(ctx, nodes, retire)
}

// replacing reads the current generation and prepares c as its
// replacement (prepareReplacement), compared with it; a same-kind
// credential change is refused. Before the first commit it is
// errNotCommitted. Preview and Replace share it, so both decide alike.
func (s *Service) replacing(ctx context.Context, c Candidate, set Fields) (store.GenerationSeen, prepared, sameness, error) {
	seen, err := s.store.SeenGeneration(ctx)
	if err != nil {
		return store.GenerationSeen{}, prepared{}, sameness{}, err
	}
	cur, ok := seen.Current()
	if !ok {
		return store.GenerationSeen{}, prepared{}, sameness{}, fmt.Errorf("replace deployment: %w", errNotCommitted)
	}
	p, err := s.prepareReplacement(c, set, cur)
	if err != nil {
		return store.GenerationSeen{}, prepared{}, sameness{}, err
	}
	d, err := s.compare(p, cur)
	if err != nil {
		return store.GenerationSeen{}, prepared{}, sameness{}, err
	}
	if d.rekey, err = s.credentialChange(p, cur, d); err != nil {
		return store.GenerationSeen{}, prepared{}, sameness{}, err
	}
	if d.rekey && (p.reg.Mode != providers.ModeDirect || s.opts.Direct == nil) {
		return store.GenerationSeen{}, prepared{}, sameness{}, fmt.Errorf("replace deployment: %w", errCredentialReplacementUnsupported)
	}
	return seen, p, d, nil
}

// credentialChange reports whether p keeps the current provider kind but
// brings another credential than the current one: a key replacement,
// which only a direct provider supports (Service.rekey). A candidate of
// another kind brings its own. d is p compared with cur: its credential
// verdict is reused when compare made one (an equal selection), so the
// stored credential is opened once.
func (s *Service) credentialChange(p prepared, cur store.Generation, d sameness) (bool, error) {
	if p.kind != cur.ProviderKind {
		return false, nil
	}
	same := d.credential
	if !d.selection {
		var err error
		if same, err = s.sameCredential(p, cur); err != nil {
			return false, err
		}
	}
	return !same, nil
}

// rekey commits a key replacement of a direct provider as generation
// number: inside the direct lane's drain gate (Options.Gate over
// store.DirectLane: the lane's worker stops between operations, and
// nothing is sent through the old key while the new one is verified),
// Options.Direct.Rekey fences the old key's calls, verifies the new key
// against every retained generation of the kind and commits, in one
// transaction, the new generation and the verified generations pointed
// at its credential (store.Replacement.Rekey). A refusal commits nothing.
func (s *Service) rekey(ctx context.Context, seen store.GenerationSeen, p prepared, next store.NewGeneration, number uint64, prov store.Provenance, eventID uuid.UUID) (Replacement, error) {
	var r store.Replaced
	req := Rekey{
		Candidate: DirectCandidate{Generation: number, Kind: p.kind, Configuration: p.enc, Specification: p.spec},
		Commit: func(rekeyed []uint64) error {
			var err error
			r, err = s.store.ReplaceGeneration(ctx, seen, next, store.Replacement{Rekey: rekeyed}, prov, eventID)
			if errdefs.IsFailedPrecondition(err) {
				return fmt.Errorf("replace deployment: %w", errGenerationMoved)
			}
			return err
		},
	}
	change := func() error { return s.opts.Direct.Rekey(ctx, req) }
	var err error
	if s.opts.Gate == nil {
		err = change()
	} else {
		err = s.opts.Gate(ctx, []uuid.UUID{store.DirectLane}, change)
	}
	if err != nil {
		return Replacement{}, err
	}
	s.opts.Events.Publish(events.Event{Kind: events.Generation})
	desc, err := s.describeWithSwitch(ctx, r.Generation)
	if err != nil {
		return Replacement{}, err
	}
	return Replacement{Deployment: desc, Changed: true, AdmissionPause: r.Locked, LockWait: r.LockWait}, nil
}
