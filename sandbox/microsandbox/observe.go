package microsandbox

import (
	"context"
	"encoding/json"
	"fmt"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// Observe reads ref's usage (`msb metrics`) after checking its ownership.
// It never starts, renews or stops anything. msb reports no process count,
// so PIDs is 0.
func (p *Provider) Observe(ctx context.Context, ref sandbox.Reference) (sandbox.Observation, error) {
	if err := p.ops.Check(sandbox.OpObserve); err != nil {
		return sandbox.Observation{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Observation{}, err
	}
	rec, err := p.inspectOwned(ctx, ref)
	if err != nil {
		return sandbox.Observation{}, fmt.Errorf("observe: %w", err)
	}
	if rec.Status != statusRunning {
		return sandbox.Observation{}, fmt.Errorf("observe: %w", errdefs.ErrRuntimeNotRunning)
	}
	res, err := p.msb.Run(ctx, Invocation{Args: []string{"metrics", rec.Name, "--format", "json"}, Limit: maxJSON})
	var m metrics
	if classify(res, err) != ranOK || res.Truncated || json.Unmarshal(res.Stdout, &m) != nil || m.Name != rec.Name {
		return sandbox.Observation{}, fmt.Errorf("observe: %w", errdefs.ErrObservationUnavailable)
	}
	return sandbox.Observation{
		Reference: ref, CPUUsageNanos: m.VCPUTimeNanos,
		MemoryBytes: m.MemoryBytes, MemoryLimitBytes: m.MemoryLimitBytes,
	}, nil
}

// ObserveBatch is unsupported: msb has no batch read by name. Callers fall
// back to Observe on this typed error only.
func (p *Provider) ObserveBatch(context.Context, []sandbox.Reference) ([]sandbox.ObservationResult, error) {
	return nil, p.ops.Check(sandbox.OpObserveBatch)
}

// DiscoverSelection is unsupported: a node provider has no deployment
// selection to discover.
func (p *Provider) DiscoverSelection(context.Context, sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	return nil, p.ops.Check(sandbox.OpDiscoverSelection)
}

// VerifyCredential is unsupported: a node provider has no credential.
func (p *Provider) VerifyCredential(context.Context, sandbox.NativeConfiguration) error {
	return p.ops.Check(sandbox.OpVerifyCredential)
}
