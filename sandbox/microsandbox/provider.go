package microsandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providercontract"
)

// Kind is the microsandbox provider's kind.
const Kind = "microsandbox"

// PinnedVersion is the one msb release the adapter drives; `msb --version`
// must print exactly "msb " + PinnedVersion. libkrunfw comes with it.
const (
	PinnedVersion   = "0.6.18"
	PinnedLibkrunfw = "libkrunfw.so.5.6.1"
)

// The ownership labels carried by every sandbox (the same keys as the
// Docker adapter's, so an operator reads one vocabulary).
const (
	LabelInstallation = "io.berth.installation"
	LabelTenant       = "io.berth.tenant"
	LabelEnvironment  = "io.berth.environment"
	LabelAllocation   = "io.berth.allocation"
)

// The reason codes of the adapter's unsupported operations.
const (
	ReasonNoNativeBatch providercontract.ReasonCode = "microsandbox_no_native_batch"
	// ReasonNoCheckpoints: checkpoints on `msb snapshot` are not built yet
	// (doc.go says which guarantee is missing).
	ReasonNoCheckpoints providercontract.ReasonCode = "microsandbox_no_checkpoints"
)

// Operations is the adapter's one declaration, shared by its instances and
// its registration. Checkpoints are declared unsupported (checkpoint.go).
func Operations() providercontract.Operations {
	s := providercontract.Supported()
	return sandbox.WithoutCheckpoints(providercontract.Operations{
		sandbox.OpCreate: s, sandbox.OpGetInfo: s, sandbox.OpRenew: s, sandbox.OpKill: s, sandbox.OpRunCommand: s,
		sandbox.OpObserve:           s,
		sandbox.OpObserveBatch:      providercontract.Unsupported(ReasonNoNativeBatch),
		sandbox.OpDiscoverSelection: providercontract.Unsupported(nodeconfig.ReasonNoDiscovery),
		sandbox.OpVerifyCredential:  providercontract.Unsupported(nodeconfig.ReasonNoCredential),
	}, ReasonNoCheckpoints)
}

// Options configure a Provider.
type Options struct {
	// InstallationID binds every sandbox to the installation.
	InstallationID string
	Config         NodeConfig
	// Resources are the deployment's per-sandbox limits, used by the
	// probe's capacity check; Create takes its limits from the request.
	Resources sandbox.Resources
	// StateDirectory is the generation's state directory on the node
	// (providerapi.LocalOptions.GenerationStateDirectory): workspaces and
	// the adapter's records live below it.
	StateDirectory string
	// Host are the host files the probe reads; zero fields are the real
	// host's (DefaultHostPaths). Only tests set them.
	Host HostPaths
}

// Provider is the microsandbox adapter.
type Provider struct {
	// CheckpointsUnsupported answers every CheckpointProvider method
	// with the typed error of the declaration (ReasonNoCheckpoints);
	// doc.go says which guarantee of checkpoints on `msb snapshot` is not
	// met.
	sandbox.CheckpointsUnsupported
	ops  providercontract.Operations
	msb  Runner
	opts Options

	// mu guards busy: one semaphore per sandbox name, held by the
	// mutating operations of that name (Create and Kill), so that Kill
	// waits for a Create of this process whose msb call still runs.
	mu   sync.Mutex
	busy map[string]*nameLock
	// creating counts the Creates of this process in progress by name:
	// while one runs, its msb call may still change the record, so no
	// observation claims the creation settled (info).
	creating map[string]int
}

// nameLock is one name's semaphore and the number of its holders and
// waiters (the entry goes when that reaches zero).
type nameLock struct {
	sem chan struct{}
	n   int
}

var (
	_ sandbox.SandboxProvider    = (*Provider)(nil)
	_ sandbox.CheckpointProvider = (*Provider)(nil)
	_ sandbox.ObservationSource  = (*Provider)(nil)
)

// New returns an adapter that drives msb through run. With a nil run only
// the operations declared unsupported may be called.
func New(run Runner, opts Options) *Provider {
	ops := Operations()
	return &Provider{CheckpointsUnsupported: sandbox.CheckpointsUnsupported{Ops: ops}, ops: ops, msb: run, opts: opts, busy: map[string]*nameLock{}, creating: map[string]int{}}
}

// startCreate marks a Create of name in progress until the returned
// function runs.
func (p *Provider) startCreate(name string) func() {
	p.mu.Lock()
	p.creating[name]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.creating[name]--; p.creating[name] == 0 {
			delete(p.creating, name)
		}
		p.mu.Unlock()
	}
}

func (p *Provider) isCreating(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.creating[name] > 0
}

// hold takes name's semaphore, waiting at most until ctx ends, and returns
// its release.
func (p *Provider) hold(ctx context.Context, name string) (func(), error) {
	p.mu.Lock()
	l, ok := p.busy[name]
	if !ok {
		l = &nameLock{sem: make(chan struct{}, 1)}
		p.busy[name] = l
	}
	l.n++
	p.mu.Unlock()
	done := func() {
		p.mu.Lock()
		if l.n--; l.n == 0 {
			delete(p.busy, name)
		}
		p.mu.Unlock()
	}
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem; done() }, nil
	case <-ctx.Done():
		done()
		return nil, errdefs.ErrComputeUnconfirmed
	}
}

// ProviderOperations returns a copy of the declaration.
func (p *Provider) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// Name is the deterministic sandbox name of ref.
func (p *Provider) Name(ref sandbox.Reference) string {
	return ResourceName(p.opts.InstallationID, ref)
}

// ResourceName derives the sandbox name of ref in an installation.
func ResourceName(installation string, ref sandbox.Reference) string {
	sum := sha256.Sum256([]byte(installation + "\x00" + ref.TenantID + "\x00" + ref.EnvironmentID + "\x00" + ref.AllocationID))
	return "berth-" + hex.EncodeToString(sum[:12])
}

// Labels returns the ownership labels of ref's sandbox.
func (p *Provider) Labels(ref sandbox.Reference) map[string]string {
	return map[string]string{
		LabelInstallation: p.opts.InstallationID,
		LabelTenant:       ref.TenantID,
		LabelEnvironment:  ref.EnvironmentID,
		LabelAllocation:   ref.AllocationID,
	}
}

// owns reports whether labels carry every ownership label of ref.
func (p *Provider) owns(ref sandbox.Reference, labels map[string]string) bool {
	for k, v := range p.Labels(ref) {
		if labels[k] != v {
			return false
		}
	}
	return true
}
