package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// Observe reads ref's container usage after checking its ownership. It
// never starts, renews or stops anything.
func (p *Provider) Observe(ctx context.Context, ref sandbox.Reference) (sandbox.Observation, error) {
	if err := p.ops.Check(sandbox.OpObserve); err != nil {
		return sandbox.Observation{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Observation{}, err
	}
	c, err := p.inspectOwned(ctx, ref)
	if err != nil {
		return sandbox.Observation{}, fmt.Errorf("observe: %w", err)
	}
	res, err := p.cli.ContainerStats(ctx, c.ID, client.ContainerStatsOptions{Stream: false})
	if err != nil {
		return sandbox.Observation{}, fmt.Errorf("observe: %w", errdefs.ErrObservationUnavailable)
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&st); err != nil {
		return sandbox.Observation{}, fmt.Errorf("observe: %w", errdefs.ErrObservationUnavailable)
	}
	return sandbox.Observation{
		Reference:        ref,
		CPUUsageNanos:    st.CPUStats.CPUUsage.TotalUsage,
		MemoryBytes:      st.MemoryStats.Usage,
		MemoryLimitBytes: st.MemoryStats.Limit,
		PIDs:             st.PidsStats.Current,
	}, nil
}

// ObserveBatch is unsupported: the engine has no batch stats read. Callers
// fall back to Observe on this typed error only.
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
