package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// A fork's seed is its snapshot copied to a node other than the source's,
// where children of the fork were placed (migration 0035). The node's
// lifecycle worker imports it (ClaimForkSeed, RecordForkSeedReady or
// FailForkSeed) and discards it once the fork has ended
// (MarkForkSeedDiscarded).

// SeedState is where a fork's seed is (migration 0035).
type SeedState string

// The seed states.
const (
	SeedOwed      SeedState = "owed"
	SeedImporting SeedState = "importing"
	SeedReady     SeedState = "ready"
	SeedFailed    SeedState = "failed"
	SeedDiscarded SeedState = "discarded"
)

// MaxSeedAttempts bounds a seed's import attempts: each may be cut short
// (a node agent restarted, a stream broken) and is redone under the same
// operation; after this many the seed fails.
const MaxSeedAttempts = 3

// ForkFailureSeed is the failure code of a fork's children on a node
// whose seed failed.
const ForkFailureSeed = "fork_seed_failed"

// ForkSeed is one seed of a fork.
type ForkSeed struct {
	ForkID, NodeID, Operation uuid.UUID
	State                     SeedState
	Attempts                  int
	// Snapshot is the imported seed (zero until ready).
	Snapshot         sandbox.SnapshotIdentity
	CreatedAt        time.Time
	ReadyAt, EndedAt *time.Time
}

func seedFromRow(r db.ForkSeed) ForkSeed {
	return ForkSeed{
		ForkID: r.ForkID, NodeID: r.NodeID, Operation: r.Operation, State: SeedState(r.State), Attempts: int(r.Attempts),
		Snapshot:  sandbox.SnapshotIdentity{ID: r.SnapshotID.String, Provenance: r.SnapshotProvenance.String},
		CreatedAt: r.CreatedAt, ReadyAt: r.ReadyAt, EndedAt: r.EndedAt,
	}
}

// SeedWork is a seed its node's worker has work for, with what of its
// fork the work needs.
type SeedWork struct {
	Seed ForkSeed
	// ForkState says which work: import (ready) or discard (settled,
	// failed).
	ForkState          ForkState
	SourceAllocationID uuid.UUID
	SourceNodeID       uuid.UUID
	// ViaAllocationID is a child of the fork on the seed's node: the
	// node's calls about the seed are addressed with it
	// (sandbox.ImportRequest.Via).
	ViaAllocationID uuid.UUID
	// Snapshot is the fork's snapshot on the source's node, the import's
	// source.
	Snapshot sandbox.SnapshotIdentity
}

// GetForkSeed reads fork's seed on node. ErrNotFound when there is none.
func (s *Reader) GetForkSeed(ctx context.Context, fork, node uuid.UUID) (ForkSeed, error) {
	r, err := s.q.GetForkSeed(ctx, db.GetForkSeedParams{ForkID: fork, NodeID: node})
	if err != nil {
		return ForkSeed{}, wrap("get fork seed", err)
	}
	return seedFromRow(r), nil
}

// ListSeedWorkForNode pages, by fork id after after, node nodeID's seed
// work: a seed to import of a ready fork, and any seed not yet discarded
// of a fork that has ended.
func (s *Reader) ListSeedWorkForNode(ctx context.Context, nodeID, after uuid.UUID, limit int) ([]SeedWork, error) {
	rows, err := s.q.ListSeedWorkForNode(ctx, db.ListSeedWorkForNodeParams{NodeID: nodeID, After: after, PageSize: int32(limit)})
	if err != nil {
		return nil, wrap("list seed work", err)
	}
	out := make([]SeedWork, len(rows))
	for i, r := range rows {
		out[i] = SeedWork{
			Seed: seedFromRow(db.ForkSeed{ForkID: r.ForkID, NodeID: r.NodeID, Operation: r.Operation, State: r.State, Attempts: r.Attempts,
				SnapshotID: r.SnapshotID, SnapshotProvenance: r.SnapshotProvenance, CreatedAt: r.CreatedAt, ReadyAt: r.ReadyAt, EndedAt: r.EndedAt}),
			ForkState: ForkState(r.ForkState), SourceAllocationID: r.SourceAllocationID, SourceNodeID: r.SourceNodeID,
			ViaAllocationID: r.ViaAllocationID,
			Snapshot:        sandbox.SnapshotIdentity{ID: r.ForkSnapshotID.String, Provenance: r.ForkSnapshotProvenance.String},
		}
	}
	return out, nil
}

// ClaimForkSeed records an import attempt of fork's seed on node while
// the fork is ready: only then may the import be sent. The seed's
// MaxSeedAttempts-th failed attempt fails it instead (FailForkSeed's
// rule), and the answer is ErrFenced; ErrFenced too when the seed is not
// owed or importing, or the fork not ready.
func (s *Owner) ClaimForkSeed(ctx context.Context, fork, node uuid.UUID) (ForkSeed, error) {
	var out ForkSeed
	var exhausted bool
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		cur, err := q.GetForkSeed(ctx, db.GetForkSeedParams{ForkID: fork, NodeID: node})
		if err != nil {
			return err
		}
		if cur.Attempts >= MaxSeedAttempts && SeedState(cur.State) == SeedImporting {
			exhausted = true
			_, _, err := failSeed(ctx, q, fork, node)
			return err
		}
		row, err := q.ClaimForkSeed(ctx, db.ClaimForkSeedParams{ForkID: fork, NodeID: node})
		if err != nil {
			return noRowFenced(err)
		}
		out = seedFromRow(row)
		return nil
	})
	switch {
	case err != nil:
		return ForkSeed{}, wrap("claim fork seed", err)
	case exhausted:
		return ForkSeed{}, fmt.Errorf("claim fork seed: %d attempts failed: %w", MaxSeedAttempts, errdefs.ErrFenced)
	}
	return out, nil
}

// RecordForkSeedReady records fork's imported seed on node and wakes the
// node's worker for the children's Creates. ErrFenced unless the seed is
// importing.
func (s *Owner) RecordForkSeedReady(ctx context.Context, fork, node uuid.UUID, snap sandbox.SnapshotIdentity) (ForkSeed, error) {
	if snap.ID == "" || snap.Provenance == "" {
		return ForkSeed{}, fmt.Errorf("record fork seed ready: %w", errdefs.Invalid("snapshot", "is required"))
	}
	var out ForkSeed
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		row, err := q.RecordForkSeedReady(ctx, db.RecordForkSeedReadyParams{ForkID: fork, NodeID: node,
			SnapshotID: pgtype.Text{String: snap.ID, Valid: true}, SnapshotProvenance: pgtype.Text{String: snap.Provenance, Valid: true}})
		if err != nil {
			return noRowFenced(err)
		}
		out = seedFromRow(row)
		return notifyNodeWork(ctx, q, node)
	})
	if err != nil {
		return ForkSeed{}, wrap("record fork seed ready", err)
	}
	return out, nil
}

// FailForkSeed fails fork's seed on node (a definite refusal): its
// children on that node not yet created end FAILED fork_seed_failed by
// terminal cleanup in the same transaction. ErrFenced unless the seed is
// owed or importing.
func (s *Owner) FailForkSeed(ctx context.Context, fork, node uuid.UUID) (ForkSeed, []Termination, error) {
	var out ForkSeed
	var terms []Termination
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		var err error
		out, terms, err = failSeed(ctx, q, fork, node)
		return err
	})
	if err != nil {
		return ForkSeed{}, nil, wrap("fail fork seed", err)
	}
	return out, terms, nil
}

// failSeed is FailForkSeed in the caller's transaction.
func failSeed(ctx context.Context, q *db.Queries, fork, node uuid.UUID) (ForkSeed, []Termination, error) {
	row, err := q.FailForkSeed(ctx, db.FailForkSeedParams{ForkID: fork, NodeID: node})
	if err != nil {
		return ForkSeed{}, nil, noRowFenced(err)
	}
	envs, err := q.ListForkChildrenUncreated(ctx, db.ListForkChildrenUncreatedParams{ForkID: &fork, NodeID: &node})
	if err != nil {
		return ForkSeed{}, nil, err
	}
	terms, err := terminateChildren(ctx, q, envs, ForkFailureSeed)
	if err != nil {
		return ForkSeed{}, nil, err
	}
	return seedFromRow(row), terms, nil
}

// MarkForkSeedDiscarded records that node holds nothing of fork's seed any
// more (ImportSnapshot's Discard confirmed). ErrFenced when it was
// discarded already.
func (s *Owner) MarkForkSeedDiscarded(ctx context.Context, fork, node uuid.UUID) (ForkSeed, error) {
	var out ForkSeed
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		row, err := q.DiscardForkSeed(ctx, db.DiscardForkSeedParams{ForkID: fork, NodeID: node})
		if err != nil {
			return noRowFenced(err)
		}
		out = seedFromRow(row)
		return nil
	})
	if err != nil {
		return ForkSeed{}, wrap("discard fork seed", err)
	}
	return out, nil
}

// notifySeedNodes wakes the workers of fork f's node and of every node it
// owes a seed.
func notifySeedNodes(ctx context.Context, q *db.Queries, f db.Fork) error {
	if err := notifyNodeWork(ctx, q, f.NodeID); err != nil {
		return err
	}
	nodes, err := q.ListForkSeedNodes(ctx, f.ID)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := notifyNodeWork(ctx, q, n); err != nil {
			return err
		}
	}
	return nil
}
