package nodeagent

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

// Diagnostic codes of a published generation the node does not serve
// ready, besides the adapter's own probe codes.
const (
	// DiagnosticBuildFailed: the generation's adapter could not be built
	// (the adapter gave no probe code of its own).
	DiagnosticBuildFailed = "build_failed"
	// DiagnosticProviderKindMismatch: the generation is of another
	// provider kind than the node's adapter.
	DiagnosticProviderKindMismatch = "provider_kind_mismatch"
	// DiagnosticDeploymentDigestMismatch: the digest Core sent is not the
	// one the node computes for the generation's kind and specification.
	DiagnosticDeploymentDigestMismatch = "deployment_digest_mismatch"
	// DiagnosticGenerationChanged: a generation the node serves was
	// published again with another selection; generations are immutable,
	// so the node keeps serving the first and reports this.
	DiagnosticGenerationChanged = "generation_changed"
	// DiagnosticProbeFailed: the probe failed without a fixed code.
	DiagnosticProbeFailed = "probe_failed"
)

// Builder builds the adapter of generation g with dir, the generation's
// own state directory (which exists). berth-nodeagent's goes through the
// registration table (providers.Build); the scale simulator passes one
// that returns its in-memory adapter.
type Builder func(ctx context.Context, g nodewire.Generation, dir string) (providers.Built, error)

// Generations is the set of deployment generations the node serves, as
// Core last published it (Serve): one adapter per generation, built in
// its own generations/<number> state directory, with its own Agent. Every
// call is routed to the Agent of the generation its metadata names
// (Agent). A start serves nothing until Core publishes.
type Generations struct {
	kind  string
	root  string
	build Builder
	log   *slog.Logger
	// built is called with every adapter built (the capacity meter
	// learns the engine's data root from the first).
	built func(providers.Built)
	now   func() time.Time

	serveMu sync.Mutex // one Serve at a time

	mu     sync.RWMutex
	served map[uint64]*generation
	closed bool
}

// generation is one served generation. agent is nil when the adapter
// could not be built; readiness then says why.
type generation struct {
	spec   nodewire.Generation
	built  providers.Built
	agent  *Agent
	digest string

	mu        sync.Mutex
	readiness *pb.Readiness
	// held is the adapter's latest count of creation-absence receipts
	// (Built.Housekeep).
	held int
	// changed: the generation was published again with another selection;
	// it stays not ready (DiagnosticGenerationChanged) whatever its probe.
	changed bool
}

// NewGenerations returns an empty set for adapters of kind, whose state
// directories are under root (the state directory's "generations").
// built, when not nil, is called with each adapter built.
func NewGenerations(kind, root string, build Builder, built func(providers.Built), log *slog.Logger) *Generations {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if built == nil {
		built = func(providers.Built) {}
	}
	return &Generations{kind: kind, root: root, build: build, built: built, log: log, now: time.Now, served: map[uint64]*generation{}}
}

// Agent returns the Agent of generation n, false when the node does not
// serve it (or could not build it).
func (s *Generations) Agent(n uint64) (*Agent, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.served[n]
	if g == nil || g.agent == nil {
		return nil, false
	}
	return g.agent, true
}

// Active is the number of operations in flight over every generation.
func (s *Generations) Active() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, g := range s.served {
		if g.agent != nil {
			n += g.agent.Active()
		}
	}
	return n
}

// Serve makes want the served set: each generation not served yet is
// built (a failure is reported in its status, never returned), and each
// served one left out stops being served at once and is closed once its
// calls in flight have finished. It returns the status of every served
// generation in ascending order. A want with a generation twice is
// refused (errdefs.ErrInvalid) and changes nothing.
func (s *Generations) Serve(ctx context.Context, want []nodewire.Generation) ([]*pb.GenerationStatus, error) {
	seen := map[uint64]bool{}
	for _, g := range want {
		if seen[g.Number] {
			return nil, errdefs.Invalid("generations", "each generation at most once")
		}
		seen[g.Number] = true
	}
	s.serveMu.Lock()
	defer s.serveMu.Unlock()

	for _, w := range want {
		s.mu.RLock()
		cur := s.served[w.Number]
		s.mu.RUnlock()
		if cur != nil && cur.agent != nil {
			if cur.spec.DeploymentDigest != w.DeploymentDigest || cur.spec.ProviderKind != w.ProviderKind {
				cur.mu.Lock()
				cur.changed = true
				cur.mu.Unlock()
				cur.setReadiness(s.notReady(w.Number, DiagnosticGenerationChanged))
				s.log.Warn("a served generation was published with another selection; the first is kept", "generation", w.Number)
			}
			continue
		}
		// Not served yet, or its build failed: (re)build it.
		g := s.open(ctx, w)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			g.close()
			return nil, errdefs.ErrObservationUnavailable
		}
		s.served[w.Number] = g
		s.mu.Unlock()
	}
	var gone []*generation
	s.mu.Lock()
	for n, g := range s.served {
		if !seen[n] {
			gone = append(gone, g)
			delete(s.served, n)
		}
	}
	s.mu.Unlock()
	for _, g := range gone {
		s.log.Info("no longer serving a generation", "generation", g.spec.Number)
		go g.retire()
	}
	return s.Statuses(), nil
}

// open builds generation w and probes it; a generation that cannot be
// built is returned without an Agent and with the reason in its readiness.
func (s *Generations) open(ctx context.Context, w nodewire.Generation) *generation {
	g := &generation{spec: w}
	digest := providers.DeploymentDigest(w.ProviderKind, w.Specification)
	switch {
	case w.ProviderKind != s.kind:
		g.readiness = s.notReady(w.Number, DiagnosticProviderKindMismatch)
		return g
	case digest != w.DeploymentDigest:
		g.readiness = s.notReady(w.Number, DiagnosticDeploymentDigestMismatch)
		return g
	}
	g.digest = digest
	dir := filepath.Join(s.root, strconv.FormatUint(w.Number, 10))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.log.Warn("generation state directory", "generation", w.Number, "error", err.Error())
		g.readiness = s.notReady(w.Number, DiagnosticBuildFailed)
		return g
	}
	bctx, cancel := context.WithTimeout(ctx, adapterBuildTimeout)
	defer cancel()
	built, err := s.build(bctx, w, dir)
	if err != nil {
		code := sandbox.ProbeCode(err)
		if code == "" {
			code = DiagnosticBuildFailed
		}
		s.log.Warn("generation not built", "generation", w.Number, "diagnostic", code)
		g.readiness = s.notReady(w.Number, code)
		return g
	}
	agent, err := NewAgent(built.Provider)
	if err != nil {
		if built.Close != nil {
			_ = built.Close()
		}
		g.readiness = s.notReady(w.Number, DiagnosticBuildFailed)
		return g
	}
	g.built, g.agent = built, agent
	s.built(built)
	g.probe(ctx, s.now)
	s.log.Info("serving a generation", "generation", w.Number, "ready", g.readiness.GetReady(), "diagnostic", g.readiness.GetDiagnosticCode())
	return g
}

func (s *Generations) notReady(n uint64, code string) *pb.Readiness {
	return &pb.Readiness{Generation: n, DiagnosticCode: code, CheckedAt: timestamppb.New(s.now())}
}

// Statuses returns the status of every served generation, ascending,
// with each one's latest readiness (no probe runs).
func (s *Generations) Statuses() []*pb.GenerationStatus {
	var out []*pb.GenerationStatus
	for _, g := range s.list() {
		st := &pb.GenerationStatus{Generation: g.spec.Number, Readiness: g.latest()}
		if g.agent != nil {
			st.BackendFingerprint = g.built.BackendFingerprint
			st.SpecificationDigest = g.built.SpecificationDigest
			st.DeploymentDigest = g.digest
		}
		out = append(out, st)
	}
	return out
}

// Probe runs the probe of every served generation (each bounded) and
// returns their readiness, ascending; a generation that was not built
// keeps the reason it was not.
func (s *Generations) Probe(ctx context.Context) []*pb.Readiness {
	var out []*pb.Readiness
	for _, g := range s.list() {
		if g.agent != nil {
			g.probe(ctx, s.now)
		}
		out = append(out, g.latest())
	}
	return out
}

// Close stops serving every generation and closes their adapters (the
// process's shutdown path; calls in flight have been stopped).
func (s *Generations) Close() {
	s.mu.Lock()
	all := s.served
	s.served, s.closed = map[uint64]*generation{}, true
	s.mu.Unlock()
	for _, g := range all {
		g.close()
	}
}

func (s *Generations) list() []*generation {
	s.mu.RLock()
	out := make([]*generation, 0, len(s.served))
	for _, g := range s.served {
		out = append(out, g)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *generation) int { return cmp.Compare(a.spec.Number, b.spec.Number) })
	return out
}

// probe runs the adapter's probe, bounded, and keeps the result.
func (g *generation) probe(ctx context.Context, now func() time.Time) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	r := &pb.Readiness{Generation: g.spec.Number, Ready: true, CheckedAt: timestamppb.New(now())}
	if g.built.Probe != nil {
		if err := g.built.Probe(pctx); err != nil {
			r.Ready = false
			if r.DiagnosticCode = sandbox.ProbeCode(err); r.DiagnosticCode == "" {
				r.DiagnosticCode = DiagnosticProbeFailed
			}
		}
	}
	g.setReadiness(r)
	g.housekeep(ctx)
}

// housekeep runs the adapter's upkeep (Built.Housekeep), bounded, and
// keeps the count of receipts it still holds. A failed pass keeps what it
// counted (the receipts it could not judge stay counted).
func (g *generation) housekeep(ctx context.Context) {
	if g.built.Housekeep == nil {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, housekeepTimeout)
	defer cancel()
	held, err := g.built.Housekeep(hctx)
	if err != nil && held == 0 {
		return
	}
	g.mu.Lock()
	g.held = held
	g.mu.Unlock()
}

// ReceiptsHeld is the number of creation-absence receipts the served
// adapters hold, counted once per backend: generations of one backend
// share its resources, so each reports the same ones (the largest count
// of a backend is taken).
func (s *Generations) ReceiptsHeld() int {
	byBackend := map[string]int{}
	for _, g := range s.list() {
		if g.agent == nil {
			continue
		}
		g.mu.Lock()
		held := g.held
		g.mu.Unlock()
		byBackend[g.built.BackendFingerprint] = max(byBackend[g.built.BackendFingerprint], held)
	}
	total := 0
	for _, n := range byBackend {
		total += n
	}
	return total
}

func (g *generation) setReadiness(r *pb.Readiness) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changed && r.GetReady() {
		r.Ready, r.DiagnosticCode = false, DiagnosticGenerationChanged
	}
	g.readiness = r
}

func (g *generation) latest() *pb.Readiness {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.readiness
}

// retire closes the adapter of a generation no longer served once its
// calls in flight have finished (at most MaxOperationTime: no call runs
// longer).
func (g *generation) retire() {
	if g.agent != nil {
		end := time.Now().Add(MaxOperationTime)
		for g.agent.Active() > 0 && time.Now().Before(end) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	g.close()
}

// close closes the adapter; its error changes nothing (the adapter is not
// used again).
func (g *generation) close() {
	if g.built.Close != nil {
		_ = g.built.Close()
	}
}
