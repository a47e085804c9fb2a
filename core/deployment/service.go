package deployment

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"

	"berth.dev/core/events"
	"berth.dev/core/secrets"
	"berth.dev/core/store"
)

// Store is what the deployment logic reads and writes.
type Store interface {
	SeenGeneration(ctx context.Context) (store.GenerationSeen, error)
	CommitGeneration(ctx context.Context, seen store.GenerationSeen, g store.NewGeneration) (store.Generation, error)
	ReplaceGeneration(ctx context.Context, seen store.GenerationSeen, g store.NewGeneration, r store.Replacement, prov store.Provenance, eventID uuid.UUID) (store.Replaced, error)
	EnabledNodes(ctx context.Context) ([]uuid.UUID, error)
	DirectReadinesses(ctx context.Context) ([]store.DirectReadiness, error)
	DirectGenerations(ctx context.Context) ([]uint64, error)
	GetProviderSwitch(ctx context.Context) (store.ProviderSwitch, error)
	GetServingPin(ctx context.Context) (store.ServingPin, error)
	RetainedGenerations(ctx context.Context) ([]store.RetainedGeneration, error)
	SetProviderDisabled(ctx context.Context, disabled bool, prov store.Provenance, eventID uuid.UUID) (store.ProviderSwitch, error)
}

// errGenerationMoved refuses a commit whose expected generation is no
// longer the current one.
var errGenerationMoved = errdefs.Refuse(errdefs.ErrFailedPrecondition, "deployment_generation_moved",
	"the expected generation is not the current one: read the deployment with GetDeployment and preview again")

// errCommitted refuses a CommitDeployment that would change a committed
// selection (provider kind, configuration or specification): only the
// initial selection is committed with CommitDeployment; a committed one is
// replaced with ReplaceDeployment, which moves the nodes to the new
// generation while the allocations keep theirs.
var errCommitted = errdefs.Refuse(errdefs.ErrFailedPrecondition, "deployment_committed",
	"a deployment is committed: replace it with ReplaceDeployment (PreviewDeployment with an update_mask first)")

// errCredentialReplacementUnsupported refuses a commit or replacement that
// keeps the committed provider kind but brings another credential, for a
// provider whose credential Core cannot replace: a node provider takes
// none (the guide), and Commit never replaces (ReplaceDeployment does,
// for a direct provider, after verifying the retained generations).
var errCredentialReplacementUnsupported = errdefs.Refuse(errdefs.ErrFailedPrecondition, "deployment_credential_replacement_unsupported",
	"this provider's credential cannot be replaced here: replace a direct provider's key with ReplaceDeployment, else keep the committed one")

// Candidate is a requested deployment.
type Candidate struct {
	ProviderKind string
	// Public is the public configuration object; empty means none.
	Public json.RawMessage
	// Credential is the write-only credential object; zero means none. It
	// is never echoed, logged or returned.
	Credential sandbox.Credential
	// Specification sizes the sandboxes and nodes. A zero suspension
	// policy is no choice: the provider's registered suspension defaults
	// apply (providers.Registration.Suspension), unless SuspensionOff.
	Specification sandbox.Specification
	// SuspensionOff is the explicit choice of no suspension. With a
	// non-zero Specification.Suspension it is invalid.
	SuspensionOff bool
}

// Format prints c without its credential, whatever the verb.
func (c Candidate) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "deployment.Candidate{kind %q, credential redacted}", c.ProviderKind)
}

// Deployment is a deployment as it may be shown: never a credential.
type Deployment struct {
	// Generation is the committed generation, 0 before the first commit
	// (in a preview: the generation a commit would create).
	Generation    uint64
	ProviderKind  string
	Public        json.RawMessage
	Observations  json.RawMessage
	HasCredential bool
	Specification sandbox.Specification
	// CommitTime is when the generation was committed; zero in a preview
	// and before the first commit.
	CommitTime time.Time
	// ProviderDisabled reports the provider switch (Disable, Enable) and
	// ProviderDisabledAt when it was set (zero while enabled). A preview
	// does not report it.
	ProviderDisabled   bool
	ProviderDisabledAt time.Time
	// ServingGeneration is the durable serving pin (store.ServingPin): the
	// generation a node last reported ready for while it was current, and
	// ServingSince since when; 0 before any. Not in a preview.
	ServingGeneration uint64
	ServingSince      time.Time
	// Retained are the generations unreleased allocations are bound to.
	// Not in a preview.
	Retained []store.RetainedGeneration
	// Nodes is what each node Core keeps a connection for serves (from
	// Options.Nodes). Not in a preview.
	Nodes []NodeServing
	// Direct is what Core's direct lane serves: each direct generation's
	// readiness as placement applies it (store.DirectReadiness.Fresh).
	// Not in a preview.
	Direct []ServedGeneration
}

// NodeServing is what one node serves, as Core's connection to it knows.
type NodeServing struct {
	NodeID uuid.UUID
	// Connected is the node's presence (store.NodePresence.Present, the
	// predicate placement applies).
	Connected   bool
	Generations []ServedGeneration
}

// ServedGeneration is one generation as a node, or the direct lane,
// serves it.
type ServedGeneration struct {
	Generation     uint64
	Ready          bool
	DiagnosticCode string
}

// Preview is what a commit of a candidate would store.
type Preview struct {
	Deployment Deployment
	// Changed is false when the candidate equals the current deployment.
	Changed bool
	// ExpectedGeneration is the current generation, to pass to Commit.
	ExpectedGeneration uint64
}

// Service is the logic of berth.admin.v1.DeploymentService.
type Service struct {
	store          Store
	registry       *providers.Registry
	key            secrets.Key
	installationID uuid.UUID
	opts           Options
}

// Options are what a Service depends on beyond its store, fixed at
// construction.
type Options struct {
	// Nodes reports what each node serves for GetDeployment (the node
	// manager's connections, and each node's presence as the database
	// decides it); nil reports none.
	Nodes func(context.Context) ([]NodeServing, error)
	// Gate runs every replacement that retires nodes (another provider
	// kind); nil runs it bare.
	Gate RetireGate
	// Events hears of each committed generation (events.Generation), so
	// the nodes are given it at once rather than at their next presence
	// record.
	Events *events.Bus
	// Direct builds and probes a candidate of a direct registration before
	// it is committed (core/direct.Set); nil commits without (tests of the
	// service alone).
	Direct DirectPreparer
}

// DirectPreparer builds and probes a direct candidate before any write:
// a candidate whose adapter cannot be built or probed is refused and
// nothing is committed (the guide: candidates are prepared and validated
// before any write).
type DirectPreparer interface {
	Prepare(ctx context.Context, c DirectCandidate) (PreparedDirect, error)
	// Rekey replaces the credential of a direct provider: it fences the
	// calls made with the old key, verifies the new one against every
	// retained generation of the kind and every allocation reference
	// still owning something, calls r.Commit once with the generations it
	// verified, and then serves them with the new key. It runs inside the
	// direct lane's drain gate. A refusal commits nothing.
	Rekey(ctx context.Context, r Rekey) error
}

// Rekey is a key replacement of a direct provider: the new generation
// (same kind, the new credential) and the commit that stores it and
// points the verified generations at its credential.
type Rekey struct {
	Candidate DirectCandidate
	Commit    func(rekeyed []uint64) error
}

// DirectCandidate is a direct candidate as it will be committed: its
// generation number, kind, configuration with its credential, and
// specification.
type DirectCandidate struct {
	Generation    uint64
	Kind          string
	Configuration sandbox.EncodedConfiguration
	Specification sandbox.Specification
}

// PreparedDirect is a built, probed candidate: Publish after its commit
// (it cannot fail), Discard when the commit did not happen.
type PreparedDirect interface {
	Publish()
	Discard()
}

// noDirect is the PreparedDirect of a node candidate, or of a Service
// without Options.Direct.
type noDirect struct{}

func (noDirect) Publish() {}
func (noDirect) Discard() {}

// prepareDirect builds and probes p when it is a direct candidate, to be
// committed as generation number.
func (s *Service) prepareDirect(ctx context.Context, p prepared, number uint64) (PreparedDirect, error) {
	if p.reg.Mode != providers.ModeDirect || s.opts.Direct == nil {
		return noDirect{}, nil
	}
	return s.opts.Direct.Prepare(ctx, DirectCandidate{Generation: number, Kind: p.kind, Configuration: p.enc, Specification: p.spec})
}

// NewService returns the DeploymentService logic over st and registry.
// key is the master key that seals credentials; installationID is the
// installation identity every sealed credential is bound to.
func NewService(st Store, registry *providers.Registry, key secrets.Key, installationID uuid.UUID, opts Options) (*Service, error) {
	switch {
	case st == nil:
		return nil, errors.New("deployment: no store")
	case registry == nil:
		return nil, errors.New("deployment: no provider registry")
	case installationID == uuid.Nil:
		return nil, errors.New("deployment: no installation id")
	}
	if !key.Valid() {
		return nil, errors.New("deployment: no master key")
	}
	return &Service{store: st, registry: registry, key: key, installationID: installationID, opts: opts}, nil
}

// OpenCredential opens generation g's sealed credential: nil when g has
// none, secrets.ErrOpen when it does not open under key for installationID
// and g's generation number.
func OpenCredential(key secrets.Key, installationID uuid.UUID, g store.Generation) ([]byte, error) {
	if !g.HasCredential() {
		return nil, nil
	}
	return key.Open(g.CredentialNonce, g.CredentialCiphertext, secrets.DeploymentCredential(installationID, g.Generation))
}

// Get returns the current deployment; before the first commit its
// generation is 0 and its provider kind empty, and after a deployment
// reset its generation is the empty generation and its kind empty.
func (s *Service) Get(ctx context.Context) (Deployment, error) {
	seen, err := s.store.SeenGeneration(ctx)
	if err != nil {
		return Deployment{}, err
	}
	cur, ok := seen.Current()
	// None current: generation 0 before the first commit, the empty
	// generation after a deployment reset (the next commit expects it).
	d := Deployment{Generation: seen.Generation()}
	if ok {
		if d, err = s.describe(cur); err != nil {
			return Deployment{}, err
		}
	}
	return s.withSwitch(ctx, d)
}

// Preview prepares and validates c and compares it with the current
// deployment. It writes nothing.
func (s *Service) Preview(ctx context.Context, c Candidate) (Preview, error) {
	p, err := s.prepare(c)
	if err != nil {
		return Preview{}, err
	}
	seen, err := s.store.SeenGeneration(ctx)
	if err != nil {
		return Preview{}, err
	}
	cur, ok := seen.Current()
	if ok {
		d, err := s.compare(p, cur)
		if err != nil {
			return Preview{}, err
		}
		if d.same() {
			d, err := s.describe(cur)
			if err != nil {
				return Preview{}, err
			}
			return Preview{Deployment: d, ExpectedGeneration: cur.Generation}, nil
		}
	}
	return Preview{
		Deployment:         p.deployment(cur.Generation + 1),
		Changed:            true,
		ExpectedGeneration: cur.Generation,
	}, nil
}

// Commit prepares and validates c again and commits it as the generation
// after expected when nothing is current: generation 1 before the first
// commit (expected 0), the empty generation's successor after a
// deployment reset (expected: the empty generation); a stale expected
// generation is refused (errGenerationMoved). After the first commit a
// candidate equal to the current deployment creates no generation and
// returns the current one, and any other is refused and writes nothing:
// another selection (errCommitted: use Replace) or only another
// credential (errCredentialReplacementUnsupported).
func (s *Service) Commit(ctx context.Context, c Candidate, expected uint64) (Deployment, error) {
	p, err := s.prepare(c)
	if err != nil {
		return Deployment{}, err
	}
	if expected >= math.MaxInt64 {
		return Deployment{}, errdefs.Invalid("expected_generation", "out of range")
	}
	seen, err := s.store.SeenGeneration(ctx)
	if err != nil {
		return Deployment{}, err
	}
	cur, ok := seen.Current()
	if cur.Generation != expected {
		return Deployment{}, fmt.Errorf("commit deployment: %w", errGenerationMoved)
	}
	if ok {
		d, err := s.compare(p, cur)
		switch {
		case err != nil:
			return Deployment{}, err
		case !d.selection:
			return Deployment{}, fmt.Errorf("commit deployment: %w", errCommitted)
		case !d.credential:
			return Deployment{}, fmt.Errorf("commit deployment: %w", errCredentialReplacementUnsupported)
		}
		return s.describeWithSwitch(ctx, cur)
	}
	next, err := s.sealed(p, expected+1)
	if err != nil {
		return Deployment{}, err
	}
	pd, err := s.prepareDirect(ctx, p, expected+1)
	if err != nil {
		return Deployment{}, err
	}
	g, err := s.store.CommitGeneration(ctx, seen, next)
	if err != nil {
		pd.Discard()
		return Deployment{}, err
	}
	pd.Publish()
	s.opts.Events.Publish(events.Event{Kind: events.Generation})
	return s.describeWithSwitch(ctx, g)
}

// sealed is p as generation number's row, its credential (if any) sealed
// for the installation and that number.
func (s *Service) sealed(p prepared, number uint64) (store.NewGeneration, error) {
	next := store.NewGeneration{
		ProviderKind:  p.kind,
		PublicConfig:  p.enc.Public,
		Observations:  p.enc.Observations,
		Specification: p.spec,
		Mode:          store.ModeNodes,
	}
	if p.reg.Mode == providers.ModeDirect {
		next.Mode = store.ModeDirect
	}
	if p.enc.Secret.Len() > 0 {
		nonce, ct, err := s.key.Seal(p.enc.Secret.Reveal(), secrets.DeploymentCredential(s.installationID, number))
		if err != nil {
			return store.NewGeneration{}, fmt.Errorf("seal deployment credential: %w", err)
		}
		next.CredentialNonce, next.CredentialCiphertext = nonce, ct
	}
	return next, nil
}

// prepared is a candidate normalized and validated through its
// registration.
type prepared struct {
	kind string
	reg  providers.Registration
	enc  sandbox.EncodedConfiguration
	spec sandbox.Specification
}

func (p prepared) deployment(generation uint64) Deployment {
	return Deployment{
		Generation:    generation,
		ProviderKind:  p.kind,
		Public:        p.enc.Public,
		Observations:  p.enc.Observations,
		HasCredential: p.enc.Secret.Len() > 0,
		Specification: p.spec,
	}
}

// prepare normalizes and validates c through the registry, its suspension
// policy resolved (suspensionOf). It does no I/O.
func (s *Service) prepare(c Candidate) (prepared, error) {
	reg, err := s.lookup(c.ProviderKind)
	if err != nil {
		return prepared{}, err
	}
	spec := c.Specification
	if spec.Suspension, err = suspensionOf(reg, c); err != nil {
		return prepared{}, err
	}
	if err := validateSelection(reg, spec); err != nil {
		return prepared{}, err
	}
	enc, err := s.registry.Normalize(c.ProviderKind, sandbox.ConfigurationInput{Public: c.Public, Credential: c.Credential})
	if err != nil {
		return prepared{}, err
	}
	return prepared{kind: c.ProviderKind, reg: reg, enc: enc, spec: spec}, nil
}

// errSuspensionOffWithPolicy refuses a candidate that turns suspension off
// and sets a policy too.
var errSuspensionOffWithPolicy = errdefs.Invalid("specification.suspension",
	"disabled with an idle time or retention: give either a policy or disabled")

// suspensionOf resolves c's suspension policy for the provider reg: the
// explicit choice of none (SuspensionOff), the candidate's own policy, or,
// without either, the provider's registered defaults (zero for a provider
// without checkpoint support). Preview, Commit and Replace resolve it
// alike, so a preview shows what a commit stores.
func suspensionOf(reg providers.Registration, c Candidate) (sandbox.SuspensionPolicy, error) {
	switch {
	case c.SuspensionOff && !c.Specification.Suspension.IsZero():
		return sandbox.SuspensionPolicy{}, errSuspensionOffWithPolicy
	case c.SuspensionOff:
		return sandbox.SuspensionPolicy{}, nil
	case c.Specification.Suspension.IsZero():
		return reg.Suspension, nil
	}
	return c.Specification.Suspension, nil
}

// lookup looks provider kind up in the registry.
func (s *Service) lookup(kind string) (providers.Registration, error) {
	if kind == "" {
		return providers.Registration{}, errdefs.Invalid("provider.kind", "required")
	}
	return s.registry.Lookup(kind)
}

// validateSelection validates spec (its suspension policy resolved)
// through the shared bounds and reg's validators.
func validateSelection(reg providers.Registration, spec sandbox.Specification) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if err := reg.ValidateResources(spec.Resources); err != nil {
		return err
	}
	if err := reg.ValidateSpecification(spec); err != nil {
		return err
	}
	if !spec.Suspension.IsZero() && !reg.Operations.Supports(sandbox.OpSuspend) {
		return errdefs.Invalid("specification.suspension", "this provider does not support suspension: leave the policy out or disable it")
	}
	return nil
}

// sameness is how a prepared candidate compares with the current
// generation.
type sameness struct {
	// selection: the same kind, specification and selectors (the
	// adapter's Equal over normalized configurations).
	selection bool
	// credential: the same credential, or none on both sides.
	credential bool
	// rekey: a replacement of the current kind that brings another
	// credential, which a direct provider replaces (Service.rekey).
	rekey bool
}

func (d sameness) same() bool { return d.selection && d.credential }

// compare compares p with the current generation cur. The credential is
// compared only for an equal selection.
func (s *Service) compare(p prepared, cur store.Generation) (sameness, error) {
	if cur.ProviderKind != p.kind || cur.Specification != p.spec {
		return sameness{}, nil
	}
	a, err := p.reg.Configuration.Decode(sandbox.EncodedConfiguration{Public: cur.PublicConfig, Observations: cur.Observations})
	if err != nil {
		// A stored configuration the adapter no longer restores is not
		// the candidate's.
		return sameness{}, nil
	}
	b, err := p.reg.Configuration.Decode(sandbox.EncodedConfiguration{Public: p.enc.Public, Observations: p.enc.Observations})
	if err != nil || !p.reg.Configuration.Equal(a, b) {
		return sameness{}, nil
	}
	same, err := s.sameCredential(p, cur)
	if err != nil {
		return sameness{}, err
	}
	return sameness{selection: true, credential: same}, nil
}

// sameCredential reports whether p brings cur's credential (or neither
// has one), comparing in constant time.
func (s *Service) sameCredential(p prepared, cur store.Generation) (bool, error) {
	if !cur.HasCredential() || p.enc.Secret.Len() == 0 {
		return cur.HasCredential() == (p.enc.Secret.Len() > 0), nil
	}
	stored, err := OpenCredential(s.key, s.installationID, cur)
	if err != nil {
		return false, fmt.Errorf("open the current deployment credential: %w", err)
	}
	return subtle.ConstantTimeCompare(stored, p.enc.Secret.Reveal()) == 1, nil
}

// describe shows a stored generation through its adapter
// (providers.Describe), so only whitelisted selectors are ever shown. The
// credential stays sealed: only whether there is one is reported.
func (s *Service) describe(g store.Generation) (Deployment, error) {
	desc, err := s.registry.Describe(g.ProviderKind, sandbox.EncodedConfiguration{Public: g.PublicConfig, Observations: g.Observations})
	if err != nil {
		// Stored data the adapter refuses is Core's failure, not the
		// caller's invalid argument.
		return Deployment{}, fmt.Errorf("describe deployment generation %d: %w", g.Generation, errors.Join(errors.New("stored configuration does not describe"), errdefs.ErrContract))
	}
	return Deployment{
		Generation:    g.Generation,
		ProviderKind:  g.ProviderKind,
		Public:        desc.Public,
		Observations:  desc.Observations,
		HasCredential: g.HasCredential(),
		Specification: g.Specification,
		CommitTime:    g.CreatedAt,
	}, nil
}
