package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// ErrProviderDisabled is the class (errdefs.ErrFailedPrecondition) of a
// CreateSession or ClaimCreate while the provider is disabled
// (SetProviderDisabled): nothing was written, and the same request may
// succeed once the provider is enabled again. It is a refusal (reason
// provider_disabled) whose message tells the operator what to do.
var ErrProviderDisabled error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "provider_disabled",
	"the sandbox provider is disabled: enable it with DeploymentService.EnableProvider")

// ProviderSwitch is the deployment's provider switch. While Disabled, Core
// admits no new hosted Session (CreateSession) and sends no new Create
// (ClaimCreate): pending allocations wait. Deletion and cleanup, Turn
// cancellation, results of running Turns and reads are never blocked.
type ProviderSwitch struct {
	Disabled bool
	// DisabledAt is when the provider was disabled (database clock, the
	// first time of a repeated disable); nil while enabled.
	DisabledAt *time.Time
}

// GetProviderSwitch reads the provider switch.
func (s *Reader) GetProviderSwitch(ctx context.Context) (ProviderSwitch, error) {
	row, err := s.q.GetProviderSwitch(ctx)
	if err != nil {
		return ProviderSwitch{}, wrap("get provider switch", err)
	}
	return ProviderSwitch{Disabled: row.ProviderDisabled, DisabledAt: row.ProviderDisabledAt}, nil
}

// SetProviderDisabled sets (disabled) or clears the provider switch,
// durably, and returns it. Disabling or enabling again changes nothing
// and records nothing. It waits for admissions that read the switch in
// their own transaction (CreateSession, ClaimCreate), so once it returns
// no admission that saw the provider enabled is still to commit.
//
// A change records its decision (provider.disable or provider.enable, by
// prov, event id eventID) in the same transaction. prov is checked before
// anything is read (the zero Provenance is invalid).
func (s *Admin) SetProviderDisabled(ctx context.Context, disabled bool, prov Provenance, eventID uuid.UUID) (ProviderSwitch, error) {
	const op = "set provider disabled"
	if err := prov.valid(); err != nil {
		return ProviderSwitch{}, fmt.Errorf("%s: %w", op, err)
	}
	var out ProviderSwitch
	err := s.inTx(ctx, func(q *db.Queries) error {
		before, err := q.LockProviderSwitch(ctx)
		if err != nil {
			return err
		}
		if err := resetFence(ctx, q); err != nil {
			return err
		}
		row, err := q.SetProviderDisabled(ctx, disabled)
		if err != nil {
			return err
		}
		out = ProviderSwitch{Disabled: row.ProviderDisabled, DisabledAt: row.ProviderDisabledAt}
		if before.ProviderDisabled == disabled {
			return nil
		}
		action := "provider.enable"
		if disabled {
			action = "provider.disable"
		}
		return recordAudit(ctx, q, prov, AuditEntry{
			ID: eventID, Kind: AuditDecision, Action: action, Resource: "deployment", Outcome: "ok",
		})
	})
	if err != nil {
		return ProviderSwitch{}, wrap(op, err)
	}
	return out, nil
}

// admitProvider is ErrDeploymentResetting while a deployment reset is
// active, ErrProviderDisabled while the provider is disabled, and returns
// the current generation (0 before the first commit, the generation floor
// after a deployment reset). It holds a share lock on the deployment row
// until the caller's transaction ends, so SetProviderDisabled, a commit of
// another generation and a reset's start or end wait for it.
func admitProvider(ctx context.Context, q *db.Queries) (int64, error) {
	row, err := q.LockProviderSwitchShared(ctx)
	if err != nil {
		return 0, err
	}
	if row.ResetID != nil {
		return 0, fmt.Errorf("admission: %w", ErrDeploymentResetting)
	}
	if row.ProviderDisabled {
		return 0, fmt.Errorf("provider switch: %w", ErrProviderDisabled)
	}
	return row.CurrentGeneration, nil
}
