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
	// CPUMillis, MemoryBytes and DiskFreeBytes are the capacity the node
	// reported; placement bounds the node by what they fit.
	CPUMillis     int64
	MemoryBytes   int64
	DiskFreeBytes int64
	// ReportAge is how long before the record the report arrived, as the
	// recording Core measured it (its monotonic clock, never a wall clock
	// compared with another host's): the record's reported_at is the
	// database's now() less ReportAge. A report recorded again with no
	// newer one has aged meanwhile, so presence ends 45 seconds after the
	// node's last report even while its connection lives. Write only; at
	// least 0.
	ReportAge time.Duration
	// Connected: the recording Core still holds the connection the report
	// came on (MarkNodeDisconnected clears it). Read only.
	Connected bool
	// ReportedAt is the database time the report arrived (the time of the
	// record less its ReportAge). Read only.
	ReportedAt time.Time
	// Present is the one presence predicate (node_present, migration
	// 0019), which placement applies too: connected, the report arrived
	// less than 45 seconds ago by the database clock, under the owner
	// epoch that holds the unexpired execution lease. Read only.
	Present bool
}

// maxReportAge bounds NodePresence.ReportAge: a report older than an hour
// is recorded an hour old (absent either way), which keeps the interval
// arithmetic far from any overflow.
const maxReportAge = time.Hour

// RecordNodePresence records a health report received on Core's
// connection to a node, under the Owner's epoch (p.OwnerEpoch is
// ignored). A Core whose owner epoch is older than the recorded one is
// fenced and changes nothing.
func (s *Owner) RecordNodePresence(ctx context.Context, p NodePresence) error {
	const op = "record node presence"
	p.OwnerEpoch = s.epoch
	if p.OwnerEpoch == 0 || p.ConnectionID == uuid.Nil {
		return fmt.Errorf("%s: %w", op, errdefs.Invalid("presence", "owner epoch and connection are required"))
	}
	if p.Generation == 0 && p.Ready {
		// Before the first commit a node serves nothing: never ready.
		return fmt.Errorf("%s: %w", op, errdefs.Invalid("presence", "a ready node serves a generation"))
	}
	if p.CPUMillis < 0 || p.MemoryBytes < 0 || p.DiskFreeBytes < 0 {
		return fmt.Errorf("%s: %w", op, errdefs.Invalid("presence", "capacity must not be negative"))
	}
	if p.ReportAge < 0 {
		return fmt.Errorf("%s: %w", op, errdefs.Invalid("presence", "report age must not be negative"))
	}
	if p.Ready {
		p.DiagnosticCode = ""
	} else if p.DiagnosticCode == "" {
		p.DiagnosticCode = "not_ready"
	}
	_, err := s.q.RecordNodePresence(ctx, db.RecordNodePresenceParams{
		NodeID: p.NodeID, ConnectionID: p.ConnectionID, OwnerEpoch: int64(p.OwnerEpoch),
		Generation: int64(p.Generation), Ready: p.Ready, DiagnosticCode: p.DiagnosticCode,
		CPUMillis: p.CPUMillis, MemoryBytes: p.MemoryBytes, DiskFreeBytes: p.DiskFreeBytes,
		ReportAgeMicros: min(p.ReportAge, maxReportAge).Microseconds(),
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
func (s *Reader) GetNodePresence(ctx context.Context, nodeID uuid.UUID) (NodePresence, error) {
	row, err := s.q.GetNodePresence(ctx, nodeID)
	if err != nil {
		return NodePresence{}, wrap("get node presence", err)
	}
	return presenceFromRow(db.ListNodePresenceRow(row)), nil
}

// NodePresences is GetNodePresence of each of the nodes ids; a node with
// no record is left out.
func (s *Reader) NodePresences(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]NodePresence, error) {
	rows, err := s.q.ListNodePresence(ctx, ids)
	if err != nil {
		return nil, wrap("list node presence", err)
	}
	out := make(map[uuid.UUID]NodePresence, len(rows))
	for _, r := range rows {
		out[r.NodeID] = presenceFromRow(r)
	}
	return out, nil
}

func presenceFromRow(row db.ListNodePresenceRow) NodePresence {
	return NodePresence{
		NodeID: row.NodeID, ConnectionID: row.ConnectionID, OwnerEpoch: uint64(row.OwnerEpoch),
		Generation: uint64(row.Generation), Ready: row.Ready, DiagnosticCode: row.DiagnosticCode,
		CPUMillis: row.CPUMillis, MemoryBytes: row.MemoryBytes, DiskFreeBytes: row.DiskFreeBytes,
		Connected: row.Connected, ReportedAt: row.ReportedAt, Present: row.Present,
	}
}

// MarkNodeDisconnected records that Core's connection connectionID to the
// node ended, so the node stops counting as present at once rather than
// when its last report turns 45 seconds old. A record that a newer
// connection wrote is left alone; so is a node without a record. It is
// fenced like RecordNodePresence, whose record it ends.
func (s *Owner) MarkNodeDisconnected(ctx context.Context, nodeID, connectionID uuid.UUID) error {
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		_, err := q.MarkNodeDisconnected(ctx, db.MarkNodeDisconnectedParams{NodeID: nodeID, ConnectionID: connectionID})
		return err
	})
	if err != nil {
		return wrap("mark node disconnected", err)
	}
	return nil
}

// MaxBackendFingerprint bounds a backend fingerprint's length.
const MaxBackendFingerprint = 256

// NodeBackend returns the backend fingerprint node nodeID is bound to
// (store.Owner.BindNodeBackend), ErrNotFound while it is unbound.
func (s *Reader) NodeBackend(ctx context.Context, nodeID uuid.UUID) (string, error) {
	fp, err := s.q.GetNodeBackend(ctx, nodeID)
	if err != nil {
		return "", wrap("get node backend", err)
	}
	return fp, nil
}

// BindNodeBackend binds the node to the native backend identified by
// fingerprint unless it is bound already, and returns the fingerprint it
// is bound to: the first one bound, which never changes for the node's
// identity. Only an Owner whose epoch holds the execution lease binds
// (ErrSuperseded otherwise); ErrNotFound-class failures come from a node
// that does not exist.
func (s *Owner) BindNodeBackend(ctx context.Context, nodeID uuid.UUID, fingerprint string) (string, error) {
	const op = "bind node backend"
	if fingerprint == "" || len(fingerprint) > MaxBackendFingerprint {
		return "", fmt.Errorf("%s: %w", op, errdefs.Invalid("backend_fingerprint", "required, at most 256 bytes"))
	}
	epoch, err := epochParam(s.epoch)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, ErrSuperseded)
	}
	var bound string
	err = s.ownedTx(ctx, func(q *db.Queries) error {
		bound, err = q.BindNodeBackend(ctx, db.BindNodeBackendParams{NodeID: nodeID, BackendFingerprint: fingerprint, OwnerEpoch: epoch})
		return err
	})
	if err != nil {
		return "", wrap(op, err)
	}
	return bound, nil
}
