package direct

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/deployment"
	"berth.dev/core/events"
	"berth.dev/core/secrets"
	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

// Store is what the Set reads and writes: the owner-bound store, because
// its readiness records and serving pin are fenced by the owner epoch.
type Store interface {
	DirectGenerations(ctx context.Context) ([]uint64, error)
	GetGeneration(ctx context.Context, generation uint64) (store.Generation, error)
	CurrentGeneration(ctx context.Context) (store.Generation, error)
	CredentialSource(ctx context.Context, generation uint64) (uint64, error)
	HeldDirectGenerations(ctx context.Context, kind string) ([]uint64, error)
	DirectAllocationsOf(ctx context.Context, generation uint64) ([]store.Allocation, error)
	GetAllocation(ctx context.Context, id uuid.UUID) (store.Allocation, error)
	DirectReadiness(ctx context.Context, generation int64) (store.DirectReadiness, error)
	RecordDirectReadiness(ctx context.Context, r store.DirectReadiness) (store.DirectReadiness, error)
	PromoteServingPin(ctx context.Context, generation uint64) (bool, error)
}

// Writes lists the store methods this package alone calls: the writes of
// a direct generation's readiness (direct_readiness). Its test fails when
// another package of the core module calls one.
var Writes = []string{"RecordDirectReadiness"}

// Defaults of Config.
const (
	// DefaultInterval is the wait between the Set's passes (build what is
	// wanted, close what is not, probe every adapter). Readiness goes
	// stale after 45 seconds (store: node_present), so 15 seconds leaves
	// two probes' room for a slow vendor.
	DefaultInterval = 15 * time.Second
	// DefaultCallTimeout bounds one build or probe.
	DefaultCallTimeout = 30 * time.Second
	// DefaultCloseTimeout bounds how long closing an adapter waits for its
	// fence to exclude every call: the lifecycle's call bound
	// (lifecycle.DefaultCallTimeout, 2 minutes) and a little more, so a
	// call that started just before still ends on its own.
	DefaultCloseTimeout = 2*time.Minute + 10*time.Second
)

// The diagnostic codes the Set records itself (an adapter's probe codes
// are recorded as they are).
const (
	// CodeBuildFailed: the adapter could not be built (its refusal's
	// reason is recorded instead when it has one).
	CodeBuildFailed = "build_failed"
	// CodeProbeFailed: the probe failed without a code of its own.
	CodeProbeFailed = "probe_failed"
	// CodeBackendMismatch: the adapter reaches another vendor namespace
	// than the one first recorded for its generation.
	CodeBackendMismatch = "backend_fingerprint_mismatch"
)

// Config configures a Set.
type Config struct {
	Store    Store
	Registry *providers.Registry
	// Key opens the generations' sealed credentials, bound to
	// InstallationID.
	Key            secrets.Key
	InstallationID uuid.UUID
	// Paths are the fixed distribution paths every direct adapter is
	// built with (read once by berth-core, never from the environment).
	Paths sandbox.ProcessPaths
	// RuntimeGateway: Core serves the Runtime gateway its public URL
	// names, so sandboxes outside Core's network can connect back; a
	// provider that requires a public origin is refused without it.
	RuntimeGateway bool
	// Events wakes a pass when a generation is committed (may be nil).
	Events      *events.Bus
	Interval    time.Duration
	CallTimeout time.Duration
	// CloseTimeout bounds an adapter's close (DefaultCloseTimeout).
	CloseTimeout time.Duration
	Log          *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// served is one built adapter.
type served struct {
	built providers.DirectBuilt
	// kind is its generation's provider kind.
	kind string
	// mismatch: its backend fingerprint differs from the one recorded
	// first for its generation; nothing is sent through it.
	mismatch bool
	// ready: its last probe succeeded. A Create waits while it is not
	// (Serves); calls about existing allocations still go through.
	ready bool
}

// Set holds one built adapter per direct generation the lane serves.
type Set struct {
	cfg   Config
	proxy *proxy

	// passing serializes a pass with a key replacement: a pass never
	// probes an adapter a replacement is fencing or swapping.
	passing sync.Mutex

	mu     sync.Mutex
	gens   map[uint64]*served
	closed bool
	// closing counts adapters being closed in the background.
	closing sync.WaitGroup
}

// New returns a Set with nothing built; Run builds.
func New(cfg Config) *Set {
	s := &Set{cfg: cfg.withDefaults(), gens: map[uint64]*served{}}
	s.proxy = &proxy{set: s, ops: Operations()}
	return s
}

// Provider returns the direct lane's provider: it routes each call to the
// adapter of the allocation's own generation.
func (s *Set) Provider() sandbox.SandboxProvider { return s.proxy }

// ErrNotServed is the class (errdefs.ErrFenced) of a call, or a Serves
// check, for a direct generation without a usable adapter: not built
// (yet, or its build failed), closed, or reaching another backend than
// its own. Nothing was sent.
var ErrNotServed error = errdefs.Refuse(errdefs.ErrFenced, "direct_generation_unavailable",
	"the direct provider's adapter for this generation is not available: nothing was sent; GetDeployment direct_generations names its diagnostic")

// errBackendMismatch refuses a call through an adapter that reaches
// another vendor namespace than its generation was first served with.
var errBackendMismatch error = errdefs.Refuse(errdefs.ErrFenced, CodeBackendMismatch,
	"the direct provider's adapter reaches another backend than this generation was served with: nothing was sent")

// Serves reports whether the direct lane can serve a Create of
// generation now (lifecycle.Config.Serves): nil only for a built adapter
// whose backend matches and whose last probe succeeded, so no create
// receipt is spent on a vendor that refuses.
func (s *Set) Serves(generation int64) error {
	if generation <= 0 {
		return ErrNotServed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, err := s.lookup(uint64(generation))
	if err != nil {
		return err
	}
	if !sv.ready {
		return ErrNotServed
	}
	return nil
}

// adapter returns generation's adapter, or why there is none.
func (s *Set) adapter(generation uint64) (sandbox.SandboxProvider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, err := s.lookup(generation)
	if err != nil {
		return nil, err
	}
	return sv.built.Provider, nil
}

// lookup returns generation's served adapter, or why there is none. The
// caller holds mu.
func (s *Set) lookup(generation uint64) (*served, error) {
	sv := s.gens[generation]
	switch {
	case s.closed || sv == nil:
		return nil, ErrNotServed
	case sv.mismatch:
		return nil, errBackendMismatch
	}
	return sv, nil
}

// Run makes a pass at once, then every Interval and after each committed
// generation, until ctx ends.
func (s *Set) Run(ctx context.Context) {
	var wake <-chan struct{}
	if s.cfg.Events != nil {
		sub := s.cfg.Events.Subscribe(events.Any(events.Generation))
		defer sub.Close()
		wake = sub.Ready()
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if err := s.Pass(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("direct provider pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// Pass builds an adapter for each wanted generation without one, closes
// those of generations no longer wanted, probes every adapter, records
// each readiness and promotes the serving pin of a ready current direct
// generation. A generation's failure is recorded as its readiness and
// does not stop the pass; a store failure does (ErrSuperseded included:
// this Core lost the lease).
func (s *Set) Pass(ctx context.Context) error {
	s.passing.Lock()
	defer s.passing.Unlock()
	wanted, err := s.cfg.Store.DirectGenerations(ctx)
	if err != nil {
		return err
	}
	s.drop(wanted)
	for _, g := range wanted {
		if err := s.serve(ctx, g); err != nil {
			return err
		}
	}
	cur, err := s.cfg.Store.CurrentGeneration(ctx)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return nil
	case err != nil:
		return err
	case cur.Mode != store.ModeDirect:
		return nil
	}
	r, err := s.cfg.Store.DirectReadiness(ctx, int64(cur.Generation))
	if errors.Is(err, errdefs.ErrNotFound) || err == nil && !r.Ready {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.cfg.Store.PromoteServingPin(ctx, cur.Generation)
	return err
}

// serve builds generation's adapter when it has none, probes it and
// records the readiness.
func (s *Set) serve(ctx context.Context, generation uint64) error {
	s.mu.Lock()
	sv := s.gens[generation]
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	if sv == nil {
		built, kind, err := s.build(ctx, generation)
		if err != nil {
			s.cfg.Log.Warn("direct provider build failed", "generation", generation, "error", err)
			return s.record(ctx, generation, "", diagnostic(err, CodeBuildFailed))
		}
		sv = &served{built: built, kind: kind}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			s.closeAdapter(built)
			return nil
		}
		s.gens[generation] = sv
		s.mu.Unlock()
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	perr := sv.built.Probe(pctx)
	cancel()
	prev, err := s.cfg.Store.DirectReadiness(ctx, int64(generation))
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	mismatch := prev.BackendFingerprint != "" && prev.BackendFingerprint != sv.built.BackendFingerprint
	s.mu.Lock()
	sv.mismatch = mismatch
	sv.ready = perr == nil && !mismatch
	s.mu.Unlock()
	switch {
	case mismatch:
		return s.record(ctx, generation, "", CodeBackendMismatch)
	case perr != nil:
		code := sandbox.ProbeCode(perr)
		if !validCode(code) {
			code = diagnostic(perr, CodeProbeFailed)
		}
		return s.record(ctx, generation, sv.built.BackendFingerprint, code)
	}
	return s.record(ctx, generation, sv.built.BackendFingerprint, "")
}

// record writes generation's readiness: ready when code is empty.
func (s *Set) record(ctx context.Context, generation uint64, fingerprint, code string) error {
	_, err := s.cfg.Store.RecordDirectReadiness(ctx, store.DirectReadiness{
		Generation: int64(generation), Ready: code == "", DiagnosticCode: code, BackendFingerprint: fingerprint,
	})
	return err
}

// build constructs generation's adapter through the registry's checked
// path: its stored selectors, the credential it uses now (its own, or the
// one a key replacement pointed it at: store.CredentialSource) opened
// beside them, the fixed process paths. It returns the generation's
// provider kind too.
func (s *Set) build(ctx context.Context, generation uint64) (providers.DirectBuilt, string, error) {
	g, err := s.cfg.Store.GetGeneration(ctx, generation)
	if err != nil {
		return providers.DirectBuilt{}, "", err
	}
	src, err := s.cfg.Store.CredentialSource(ctx, generation)
	if err != nil {
		return providers.DirectBuilt{}, "", err
	}
	sealed := g
	if src != generation {
		if sealed, err = s.cfg.Store.GetGeneration(ctx, src); err != nil {
			return providers.DirectBuilt{}, "", err
		}
	}
	secret, err := deployment.OpenCredential(s.cfg.Key, s.cfg.InstallationID, sealed)
	if err != nil {
		return providers.DirectBuilt{}, "", err
	}
	var cred sandbox.Credential
	if secret != nil {
		cred = sandbox.NewCredential(secret)
	}
	built, err := s.buildWith(ctx, g.ProviderKind, generation, sandbox.EncodedConfiguration{Public: g.PublicConfig, Observations: g.Observations}, cred, g.Specification)
	return built, g.ProviderKind, err
}

// buildWith builds one adapter of kind for generation with the stored
// selectors enc and credential cred, bounded by CallTimeout.
func (s *Set) buildWith(ctx context.Context, kind string, generation uint64, enc sandbox.EncodedConfiguration,
	cred sandbox.Credential, spec sandbox.Specification) (providers.DirectBuilt, error) {
	bctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	return s.cfg.Registry.BuildDirect(bctx, kind, providers.DirectRequest{
		Deployment:     sandbox.EncodedConfiguration{Public: enc.Public, Observations: enc.Observations},
		Credential:     cred,
		Specification:  spec,
		InstallationID: s.cfg.InstallationID.String(),
		Generation:     generation,
		Paths:          s.cfg.Paths,
	})
}

// drop closes, in the background, the adapters of generations not in
// wanted.
func (s *Set) drop(wanted []uint64) {
	s.mu.Lock()
	var gone []providers.DirectBuilt
	for g, sv := range s.gens {
		if !slices.Contains(wanted, g) {
			gone = append(gone, sv.built)
			delete(s.gens, g)
		}
	}
	s.mu.Unlock()
	for _, b := range gone {
		s.closeLater(b)
	}
}

// closeAdapter excludes b's fence, bounded by CloseTimeout, then closes
// it: no call is cut short unless it outlives the bound.
func (s *Set) closeAdapter(b providers.DirectBuilt) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CloseTimeout)
	defer cancel()
	if _, err := b.Fence.Exclude(ctx); err != nil {
		s.cfg.Log.Warn("direct provider closed with calls still running", "error", err)
	}
	if err := b.Close(); err != nil {
		s.cfg.Log.Warn("direct provider close failed", "error", err)
	}
}

// Close stops serving and closes every adapter once its fence excluded
// every call (bounded by CloseTimeout each). The lane's worker must be
// drained first (core/daemon stops it before).
func (s *Set) Close() error {
	s.mu.Lock()
	s.closed = true
	gens := s.gens
	s.gens = map[uint64]*served{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, sv := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.closeAdapter(sv.built)
		}()
	}
	wg.Wait()
	s.closing.Wait()
	return nil
}

// codePattern is direct_readiness.diagnostic_code's form.
var codePattern = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

func validCode(code string) bool { return codePattern.MatchString(code) }

// diagnostic is err's fixed refusal reason when it has one that fits a
// diagnostic code, else fallback: never an error's text.
func diagnostic(err error, fallback string) string {
	if r, ok := errdefs.AsRefusal(err); ok && validCode(r.Reason) {
		return r.Reason
	}
	return fallback
}
