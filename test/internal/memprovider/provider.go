package memprovider

import (
	"context"
	"sync"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// The reason codes of its unsupported operations.
const (
	ReasonNoCheckpoint  providercontract.ReasonCode = "memory_no_checkpoint"
	ReasonNoObservation providercontract.ReasonCode = "memory_no_observation"
	ReasonNoDiscovery   providercontract.ReasonCode = "memory_no_discovery"
	ReasonNoCredential  providercontract.ReasonCode = "memory_no_credential"
)

// Operations is the declaration: the five required operations supported,
// everything else unsupported.
func Operations() providercontract.Operations {
	s := providercontract.Supported()
	cp := providercontract.Unsupported(ReasonNoCheckpoint)
	return providercontract.Operations{
		sandbox.OpCreate: s, sandbox.OpGetInfo: s, sandbox.OpRenew: s, sandbox.OpKill: s, sandbox.OpRunCommand: s,
		sandbox.OpInitial: cp, sandbox.OpNewCompute: cp, sandbox.OpGetCompute: cp, sandbox.OpSuspend: cp, sandbox.OpCapture: cp, sandbox.OpCreateSeeded: cp, sandbox.OpExportSnapshot: cp, sandbox.OpImportSnapshot: cp,
		sandbox.OpResume: cp, sandbox.OpResumeCompute: cp, sandbox.OpKillCompute: cp,
		sandbox.OpDeleteSnapshot: cp, sandbox.OpRunCommandCompute: cp,
		sandbox.OpObserve:           providercontract.Unsupported(ReasonNoObservation),
		sandbox.OpObserveBatch:      providercontract.Unsupported(ReasonNoObservation),
		sandbox.OpDiscoverSelection: providercontract.Unsupported(ReasonNoDiscovery),
		sandbox.OpVerifyCredential:  providercontract.Unsupported(ReasonNoCredential),
	}
}

// Provider holds one simulated node's compute in memory. It is safe for
// concurrent use.
type Provider struct {
	ops providercontract.Operations

	mu      sync.Mutex
	running map[sandbox.Reference]string // Reference -> provider id
	killed  map[sandbox.Reference]bool   // tombstones
	creates int
}

// New returns a Provider holding nothing.
func New() *Provider {
	return &Provider{ops: Operations(), running: map[sandbox.Reference]string{}, killed: map[sandbox.Reference]bool{}}
}

// Adopt records ref as running under providerID, as if a Create had
// settled before this process started: the simulator seeds the compute of
// allocations it wrote into the database directly.
func (p *Provider) Adopt(ref sandbox.Reference, providerID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[ref] = providerID
}

// Len returns how many References run; Creates how many Creates succeeded.
func (p *Provider) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.running)
}

// Creates returns how many Creates succeeded.
func (p *Provider) Creates() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.creates
}

// ProviderOperations returns a copy of the declaration.
func (p *Provider) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// Create records req's Reference as running, once.
func (p *Provider) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpCreate); err != nil {
		return sandbox.Info{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Info{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ref := req.Reference
	if _, ok := p.running[ref]; ok || p.killed[ref] {
		return sandbox.Info{}, errdefs.ErrExists
	}
	id := "mem-" + ref.AllocationID
	p.running[ref] = id
	p.creates++
	return runningInfo(ref, id), nil
}

// GetInfo reads the record: running, an absence receipt after Kill, or
// ErrNotFound (only a missing observation) for a Reference it never saw.
func (p *Provider) GetInfo(_ context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpGetInfo); err != nil {
		return sandbox.Info{}, err
	}
	return p.info(ref)
}

// Renew only observes: there is no native lease.
func (p *Provider) Renew(_ context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpRenew); err != nil {
		return sandbox.Info{}, err
	}
	return p.info(ref)
}

func (p *Provider) info(ref sandbox.Reference) (sandbox.Info, error) {
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.running[ref]; ok {
		return runningInfo(ref, id), nil
	}
	if p.killed[ref] {
		return sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true}, nil
	}
	return sandbox.Info{}, errdefs.ErrNotFound
}

// Kill removes the Reference's compute and keeps a tombstone; repeated
// Kills succeed.
func (p *Provider) Kill(_ context.Context, req sandbox.KillRequest) error {
	if err := p.ops.Check(sandbox.OpKill); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	ref := req.Reference
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, ref)
	p.killed[ref] = true
	return nil
}

// RunCommand answers a fixed result (exit 0, no output) for running
// compute; it runs nothing.
func (p *Provider) RunCommand(_ context.Context, ref sandbox.Reference, cmd sandbox.Command) (sandbox.CommandResult, error) {
	if err := p.ops.Check(sandbox.OpRunCommand); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	if len(cmd.Args) == 0 {
		return sandbox.CommandResult{}, errdefs.Invalid("command.args", "required")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.running[ref]; !ok {
		return sandbox.CommandResult{}, errdefs.ErrNotFound
	}
	return sandbox.CommandResult{ExitCode: 0}, nil
}

func runningInfo(ref sandbox.Reference, id string) sandbox.Info {
	return sandbox.Info{Reference: ref, ProviderID: id, State: sandbox.StateRunning, BootstrapComplete: true, CreateSettled: true}
}
