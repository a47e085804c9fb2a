package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// DirectLane is the lane of the direct generations' Environments (a
// direct provider: Core calls the adapter itself, no node agent): the nil
// UUID, which no node id can be (migration 0001). A placement or an
// allocation on it has node_id NULL in the database (migration 0020) and
// NodeID DirectLane in Go. The …ForNode scans and AllocatePending take it
// as the lane of the one direct worker; a direct generation's Sessions are
// placed on it, and its writes queue DirectWorkEvent.
var DirectLane = uuid.Nil

// laneOf is the lane of a nullable node_id column: DirectLane for NULL.
func laneOf(n *uuid.UUID) uuid.UUID {
	if n == nil {
		return DirectLane
	}
	return *n
}

// laneParam is the node_id column value of lane: NULL for DirectLane.
func laneParam(lane uuid.UUID) *uuid.UUID {
	if lane == DirectLane {
		return nil
	}
	return &lane
}

// ErrDirectNotReady is the class (errdefs.ErrFailedPrecondition) of a
// CreateSession for a direct generation whose readiness is not fresh: no
// ready probe recorded for it under the owner epoch that holds the
// execution lease within the last 45 seconds. Nothing was written.
var ErrDirectNotReady error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "direct_provider_not_ready",
	"the direct provider is not ready for the current generation: GetDeployment direct_generations names its diagnostic")

// ErrDirectCapacityFull is the class (errdefs.ErrFailedPrecondition) of a
// CreateSession for a direct generation while the direct lane holds
// max_active Environments. Nothing was written.
var ErrDirectCapacityFull error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "direct_capacity_full",
	"max_active Sessions are held: delete Sessions or raise max_active")

// choosePlacementLane picks the lane of a new Session of p's generation:
// the direct lane for a direct generation (chooseDirectLane), else a node
// (choosePlacementNode). A generation that is not stored counts as a node
// generation, as the placement trigger does.
func choosePlacementLane(ctx context.Context, q *db.Queries, p CreateSessionParams) (uuid.UUID, error) {
	mode, err := q.GetGenerationMode(ctx, p.Generation)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return uuid.Nil, err
	case GenerationMode(mode) == ModeDirect:
		return DirectLane, chooseDirectLane(ctx, q, p)
	}
	chosen, err := choosePlacementNode(ctx, q, p)
	if err != nil {
		return uuid.Nil, err
	}
	return chosen.ID, nil
}

// chooseDirectLane admits a new Session of direct generation p.Generation
// on the direct lane: its readiness is fresh (ErrDirectNotReady) and the
// lane holds fewer than p.MaxActive Environments (ErrDirectCapacityFull).
// The lane's direct_load row stays locked until the transaction ends, so
// concurrent direct creations never both take the last slot. CPU, memory
// and disk are not reported for the lane: the adapter's
// ValidateResources bounds them when the generation is committed.
func chooseDirectLane(ctx context.Context, q *db.Queries, p CreateSessionParams) error {
	lane, err := q.ChooseDirectLane(ctx, p.Generation)
	if err != nil {
		return err
	}
	switch {
	case !lane.Ready:
		return ErrDirectNotReady
	case lane.Held >= int64(p.MaxActive):
		return ErrDirectCapacityFull
	}
	return nil
}

// DirectHeld returns how many Environments the direct lane holds (its
// unreleased placements or allocations): the count CreateSession compares
// with max_active for a direct generation.
func (s *Reader) DirectHeld(ctx context.Context) (int64, error) {
	row, err := s.q.GetDirectHeld(ctx)
	if err != nil {
		return 0, wrap("direct held", err)
	}
	return row.Held, nil
}

// DirectReadiness is the readiness of a direct generation, as Core's
// probe of its adapter found it.
type DirectReadiness struct {
	Generation int64
	// Ready: the probe succeeded; DiagnosticCode is empty exactly then
	// (otherwise a fixed code, ^[a-z0-9_]{1,64}$).
	Ready          bool
	DiagnosticCode string
	// BackendFingerprint names the vendor namespace the adapter reaches
	// (at most 256 bytes; empty when the adapter reports none). It is bound
	// once: the first one recorded stays. Write: the one this probe saw.
	BackendFingerprint string
	// OwnerEpoch and CheckedAt: who recorded it and when (database
	// clock). Read only.
	OwnerEpoch uint64
	CheckedAt  time.Time
	// Fresh is the rule placement applies: ready, recorded under the owner
	// epoch that holds the unexpired execution lease, less than 45 seconds
	// ago. Read only.
	Fresh bool
}

// RecordDirectReadiness records the probe result of direct generation
// r.Generation under the Owner's epoch, checked now, and returns the
// stored row (its BackendFingerprint the bound one, which the caller
// compares with its own). It is fenced by the owner epoch: ErrSuperseded
// unless the Owner holds the execution lease, and a row recorded under a
// newer epoch is never overwritten (ErrSuperseded too). A generation that
// is not a direct one is ErrFailedPrecondition; ErrNotFound when it is
// not stored.
func (s *Owner) RecordDirectReadiness(ctx context.Context, r DirectReadiness) (DirectReadiness, error) {
	const op = "record direct readiness"
	epoch, err := epochParam(s.epoch)
	if err != nil {
		return DirectReadiness{}, fmt.Errorf("%s: %w", op, ErrSuperseded)
	}
	switch {
	case r.Generation <= 0:
		return DirectReadiness{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("generation", "must be positive"))
	case r.Ready != (r.DiagnosticCode == ""):
		return DirectReadiness{}, fmt.Errorf("%s: %w", op,
			errdefs.Invalid("diagnostic_code", "must be empty exactly when ready"))
	case !validDiagnosticCode(r.DiagnosticCode):
		return DirectReadiness{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("diagnostic_code", "must match ^[a-z0-9_]{0,64}$"))
	case len(r.BackendFingerprint) > 256:
		return DirectReadiness{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("backend_fingerprint", "at most 256 bytes"))
	}
	fingerprint := pgtype.Text{String: r.BackendFingerprint, Valid: r.BackendFingerprint != ""}
	var out DirectReadiness
	err = s.ownedTx(ctx, func(q *db.Queries) error {
		mode, err := q.GetGenerationMode(ctx, r.Generation)
		if err != nil {
			return err
		}
		if GenerationMode(mode) != ModeDirect {
			return fmt.Errorf("generation %d is not a direct generation: %w", r.Generation, errdefs.ErrFailedPrecondition)
		}
		row, err := q.RecordDirectReadiness(ctx, db.RecordDirectReadinessParams{
			Generation: r.Generation, OwnerEpoch: epoch, Ready: r.Ready,
			DiagnosticCode: r.DiagnosticCode, BackendFingerprint: fingerprint,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrSuperseded
		}
		if err != nil {
			return err
		}
		out = directReadinessFromRow(row, false)
		return nil
	})
	if err != nil {
		return DirectReadiness{}, wrap(op, err)
	}
	return out, nil
}

// DirectReadiness returns direct generation generation's recorded
// readiness with Fresh evaluated now; ErrNotFound when none was recorded.
func (s *Reader) DirectReadiness(ctx context.Context, generation int64) (DirectReadiness, error) {
	row, err := s.q.GetDirectReadiness(ctx, generation)
	if err != nil {
		return DirectReadiness{}, wrap("direct readiness", err)
	}
	return directReadinessFromRow(db.DirectReadiness{
		Generation: row.Generation, OwnerEpoch: row.OwnerEpoch, Ready: row.Ready,
		DiagnosticCode: row.DiagnosticCode, BackendFingerprint: row.BackendFingerprint, CheckedAt: row.CheckedAt,
	}, row.Fresh), nil
}

// DirectGenerations returns the direct generations Core's direct lane
// serves, ascending: the current generation when it is a direct one, and
// each direct generation an unreleased placement or allocation on the
// lane is bound to. core/direct keeps one adapter for each.
func (s *Reader) DirectGenerations(ctx context.Context) ([]uint64, error) {
	rows, err := s.q.ListDirectGenerations(ctx)
	if err != nil {
		return nil, wrap("direct generations", err)
	}
	out := make([]uint64, len(rows))
	for i, g := range rows {
		out[i] = uint64(g)
	}
	return out, nil
}

// DirectAllocationsOf returns the unreleased allocations on the direct
// lane bound to generation whose Create settled with a native id and
// whose cleanup is not confirmed: what still owns something at the
// vendor, which a key replacement must see with the new key. At most the
// generation's max_active.
func (s *Reader) DirectAllocationsOf(ctx context.Context, generation uint64) ([]Allocation, error) {
	rows, err := s.q.ListDirectAllocationsOfGeneration(ctx, int64(generation))
	if err != nil {
		return nil, wrap("direct allocations of generation", err)
	}
	out := make([]Allocation, len(rows))
	for i, r := range rows {
		out[i] = allocationFromRow(r)
	}
	return out, nil
}

// DirectReadinesses returns every recorded direct readiness, with Fresh
// evaluated now, ascending by generation: what GetDeployment reports as
// direct_generations.
func (s *Reader) DirectReadinesses(ctx context.Context) ([]DirectReadiness, error) {
	rows, err := s.q.ListDirectReadiness(ctx)
	if err != nil {
		return nil, wrap("direct readiness", err)
	}
	out := make([]DirectReadiness, len(rows))
	for i, row := range rows {
		out[i] = directReadinessFromRow(db.DirectReadiness{
			Generation: row.Generation, OwnerEpoch: row.OwnerEpoch, Ready: row.Ready,
			DiagnosticCode: row.DiagnosticCode, BackendFingerprint: row.BackendFingerprint, CheckedAt: row.CheckedAt,
		}, row.Fresh)
	}
	return out, nil
}

func directReadinessFromRow(r db.DirectReadiness, fresh bool) DirectReadiness {
	out := DirectReadiness{
		Generation: r.Generation, Ready: r.Ready, DiagnosticCode: r.DiagnosticCode,
		OwnerEpoch: uint64(r.OwnerEpoch), CheckedAt: r.CheckedAt, Fresh: fresh,
	}
	if r.BackendFingerprint.Valid {
		out.BackendFingerprint = r.BackendFingerprint.String
	}
	return out
}

// validDiagnosticCode reports whether code fits
// direct_readiness.diagnostic_code (^[a-z0-9_]{0,64}$).
func validDiagnosticCode(code string) bool {
	if len(code) > 64 {
		return false
	}
	for _, c := range code {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
