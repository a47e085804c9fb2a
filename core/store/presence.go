package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store/db"
)

// NodePresence is the latest health report Core recorded for a node.
type NodePresence struct {
	NodeID         uuid.UUID
	ConnectionID   uuid.UUID
	OwnerEpoch     uint64
	Generation     uint64
	Ready          bool
	DiagnosticCode string
	// ReportedAt is the database time the report was recorded.
	ReportedAt time.Time
	// Present: reported within 45 seconds by the database clock, under the
	// installation's current owner epoch.
	Present bool
}

// RecordNodePresence records a health report received on Core's
// connection to a node. A Core whose owner epoch is older than the
// recorded one is fenced and changes nothing.
func (s *Store) RecordNodePresence(ctx context.Context, p NodePresence) error {
	const op = "record node presence"
	if p.OwnerEpoch == 0 || p.Generation == 0 || p.ConnectionID == uuid.Nil {
		return fmt.Errorf("%s: %w", op, errdefs.Invalid("presence", "owner epoch, generation and connection are required"))
	}
	if p.Ready {
		p.DiagnosticCode = ""
	} else if p.DiagnosticCode == "" {
		p.DiagnosticCode = "not_ready"
	}
	_, err := s.q.RecordNodePresence(ctx, db.RecordNodePresenceParams{
		NodeID: p.NodeID, ConnectionID: p.ConnectionID, OwnerEpoch: int64(p.OwnerEpoch),
		Generation: int64(p.Generation), Ready: p.Ready, DiagnosticCode: p.DiagnosticCode,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: a newer owner recorded this node: %w", op, errdefs.ErrFenced)
	}
	if err != nil {
		return wrap(op, err)
	}
	return nil
}

// GetNodePresence returns the node's latest recorded presence, ErrNotFound
// before the first report.
func (s *Store) GetNodePresence(ctx context.Context, nodeID uuid.UUID) (NodePresence, error) {
	row, err := s.q.GetNodePresence(ctx, nodeID)
	if err != nil {
		return NodePresence{}, wrap("get node presence", err)
	}
	return NodePresence{
		NodeID: row.NodeID, ConnectionID: row.ConnectionID, OwnerEpoch: uint64(row.OwnerEpoch),
		Generation: uint64(row.Generation), Ready: row.Ready, DiagnosticCode: row.DiagnosticCode,
		ReportedAt: row.ReportedAt, Present: row.Present.Valid && row.Present.Bool,
	}, nil
}
