package deployment

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// Disable disables the sandbox provider, durably (store.SetProviderDisabled),
// and returns the deployment with the switch. While it is disabled Core
// admits no new hosted Session (CreateSession is refused with the
// store.ErrProviderDisabled refusal, reason provider_disabled) and sends
// no new Create: pending allocations keep their fresh receipts and wait.
// Deletion and cleanup, Turn cancellation, results of running Turns and
// reads are never blocked. Disabling again changes nothing. The switch
// belongs to the deployment resource, which exists before the first
// commit too, so an operator may disable the provider before committing
// one. Enable is the way back.
//
// prov is who decided (audit.From of the admin call); a change records
// provider.disable in the switch's own transaction.
func (s *Service) Disable(ctx context.Context, prov store.Provenance) (Deployment, error) {
	return s.setSwitch(ctx, "disable provider", true, prov)
}

// Enable enables the sandbox provider again: Session creation and the
// pending allocations' Creates resume. Enabling an enabled provider
// changes nothing.
func (s *Service) Enable(ctx context.Context, prov store.Provenance) (Deployment, error) {
	return s.setSwitch(ctx, "enable provider", false, prov)
}

func (s *Service) setSwitch(ctx context.Context, op string, disabled bool, prov store.Provenance) (Deployment, error) {
	eventID, err := uuid.NewRandom()
	if err != nil {
		return Deployment{}, fmt.Errorf("%s: %w", op, err)
	}
	if _, err := s.store.SetProviderDisabled(ctx, disabled, prov, eventID); err != nil {
		return Deployment{}, fmt.Errorf("%s: %w", op, err)
	}
	return s.Get(ctx)
}

// describeWithSwitch is describe with the provider switch.
func (s *Service) describeWithSwitch(ctx context.Context, g store.Generation) (Deployment, error) {
	d, err := s.describe(g)
	if err != nil {
		return Deployment{}, err
	}
	return s.withSwitch(ctx, d)
}

// withSwitch adds the deployment's state to d: the provider switch, the
// serving pin, the retained generations, what each node serves and what
// the direct lane serves.
func (s *Service) withSwitch(ctx context.Context, d Deployment) (Deployment, error) {
	sw, err := s.store.GetProviderSwitch(ctx)
	if err != nil {
		return Deployment{}, err
	}
	d.ProviderDisabled = sw.Disabled
	if sw.DisabledAt != nil {
		d.ProviderDisabledAt = *sw.DisabledAt
	}
	pin, err := s.store.GetServingPin(ctx)
	if err != nil {
		return Deployment{}, err
	}
	d.ServingGeneration, d.ServingSince = pin.Generation, pin.Since
	if d.Retained, err = s.store.RetainedGenerations(ctx); err != nil {
		return Deployment{}, err
	}
	if s.opts.Nodes != nil {
		if d.Nodes, err = s.opts.Nodes(ctx); err != nil {
			return Deployment{}, err
		}
	}
	direct, err := s.store.DirectReadinesses(ctx)
	if err != nil {
		return Deployment{}, err
	}
	// Only the generations the lane serves: a superseded one that holds
	// nothing keeps its readiness row (its first backend fingerprint) but
	// is no longer probed, and is not reported stale for ever.
	served, err := s.store.DirectGenerations(ctx)
	if err != nil {
		return Deployment{}, err
	}
	for _, r := range direct {
		if !slices.Contains(served, uint64(r.Generation)) {
			continue
		}
		g := ServedGeneration{Generation: uint64(r.Generation), Ready: r.Fresh, DiagnosticCode: r.DiagnosticCode}
		if r.Ready && !r.Fresh {
			g.DiagnosticCode = DiagnosticReadinessStale
		}
		d.Direct = append(d.Direct, g)
	}
	return d, nil
}

// DiagnosticReadinessStale is a direct generation's diagnostic code when
// its last recorded probe succeeded but is too old for placement (more
// than 45 seconds, or recorded by a Core that no longer holds the lease).
const DiagnosticReadinessStale = "readiness_stale"
