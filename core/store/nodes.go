package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// NodeState is a node's administrative state.
type NodeState string

// The node states. A node starts enrolled; an admin enables it (placement
// may use it), retires it (nothing new is placed, what it holds stays
// observable) and finally removes it. Removed is final and enrolled is only
// initial: the schema refuses any update that breaks either.
const (
	NodeEnrolled NodeState = "enrolled"
	NodeEnabled  NodeState = "enabled"
	NodeRetired  NodeState = "retired"
	NodeRemoved  NodeState = "removed"
)

// Valid reports whether s is one of the node states.
func (s NodeState) Valid() bool {
	switch s {
	case NodeEnrolled, NodeEnabled, NodeRetired, NodeRemoved:
		return true
	}
	return false
}

// Node is an enrolled compute host.
type Node struct {
	ID uuid.UUID
	// AdvertiseAddress is the host:port Core dials.
	AdvertiseAddress string
	// CertificateDER is the node certificate the installation CA issued;
	// CertificateFingerprint is its "sha256:<hex>" fingerprint.
	CertificateDER         []byte
	CertificateFingerprint string
	// PublicKeyHash is the SHA-256 of the node's public key: one key, one
	// node.
	PublicKeyHash []byte
	State         NodeState
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// CreateNode records a newly enrolled node in state enrolled. It is
// idempotent for the same id and public key hash: the stored node comes
// back unchanged (an enrollment retried after a lost response gets the
// node it already has). An id or key hash already held by another node is
// ErrExists.
func (s *Admin) CreateNode(ctx context.Context, id uuid.UUID, address string, certDER []byte, fingerprint string, publicKeyHash []byte) (Node, error) {
	const op = "create node"
	if id == uuid.Nil {
		return Node{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("node.id", "must not be the nil UUID"))
	}
	if len(publicKeyHash) != hashLen {
		return Node{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("node.public_key_hash", "must be a SHA-256"))
	}
	row, err := s.q.InsertNode(ctx, db.InsertNodeParams{
		ID:                     id,
		AdvertiseAddress:       address,
		CertificateDER:         certDER,
		CertificateFingerprint: fingerprint,
		PublicKeyHash:          publicKeyHash,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		// The id or the key hash is taken; only the same node is a replay.
		row, err = s.q.GetNode(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !bytes.Equal(row.PublicKeyHash, publicKeyHash)) {
			return Node{}, fmt.Errorf("%s: node id or public key already enrolled: %w", op, errdefs.ErrExists)
		}
	}
	if err != nil {
		return Node{}, wrap(op, err)
	}
	return nodeFromRow(row), nil
}

// GetNode returns a node by id, ErrNotFound when there is none.
func (s *Reader) GetNode(ctx context.Context, id uuid.UUID) (Node, error) {
	row, err := s.q.GetNode(ctx, id)
	if err != nil {
		return Node{}, wrap("get node", err)
	}
	return nodeFromRow(row), nil
}

// NodeByPublicKeyHash returns the node enrolled with the public key whose
// SHA-256 is publicKeyHash, ErrNotFound when there is none.
func (s *Reader) NodeByPublicKeyHash(ctx context.Context, publicKeyHash []byte) (Node, error) {
	row, err := s.q.GetNodeByPublicKeyHash(ctx, publicKeyHash)
	if err != nil {
		return Node{}, wrap("node by public key", err)
	}
	return nodeFromRow(row), nil
}

// ListNodes returns up to pageSize nodes with ids after after (uuid.Nil
// for the first page), in id order, removed ones included. next is the
// cursor for the following page, uuid.Nil when there is none.
func (s *Reader) ListNodes(ctx context.Context, pageSize int, after uuid.UUID) (page []Node, next uuid.UUID, err error) {
	const op = "list nodes"
	n, err := pageSizeParam(pageSize)
	if err != nil {
		return nil, uuid.Nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.q.ListNodes(ctx, db.ListNodesParams{After: after, PageSize: n + 1})
	if err != nil {
		return nil, uuid.Nil, wrap(op, err)
	}
	if len(rows) > pageSize {
		rows = rows[:pageSize]
		next = rows[pageSize-1].ID
	}
	page = make([]Node, len(rows))
	for i, r := range rows {
		page[i] = nodeFromRow(r)
	}
	return page, next, nil
}

// NodeCursor is a position in ListNodesByAge: the creation time and id of
// the last node of a page. The zero cursor is the start.
type NodeCursor = AgeCursor

// ListNodesByAge returns up to limit (1 to MaxPageSize+1) nodes after
// cursor after (the zero cursor for the start) in enrollment order
// (creation time, ties by id), removed ones only with includeRemoved.
func (s *Reader) ListNodesByAge(ctx context.Context, limit int, after NodeCursor, includeRemoved bool) ([]Node, error) {
	return listPage("list nodes by age", limit, func(n int32) ([]db.Node, error) {
		return s.q.ListNodesByAge(ctx, db.ListNodesByAgeParams{
			FirstPage: after.CreatedAt.IsZero(), AfterCreatedAt: after.CreatedAt, AfterID: after.ID,
			IncludeRemoved: includeRemoved, PageSize: n,
		})
	}, nodeFromRow)
}

// SetNodeState moves node id from state from to state to, as one
// compare-and-swap: when the node is no longer in from (another admin
// request or worker moved it), nothing changes and the answer is
// ErrFenced; the caller re-reads and decides again. A removed node never
// leaves removed and no node returns to enrolled (ErrInvalid). ErrNotFound
// when there is no such node. It is fenced (ErrSuperseded): the node
// states are what the owner's lifecycle workers serve, and a retirement
// commits through the owner's drain gate, which a deposed Core's drain
// cannot vouch for.
//
// A move records its decision in the same transaction, by prov with event
// id eventID: node.enable (to enabled), node.retire (to retired) or
// node.remove (to removed), with the state it left; a move to the state
// the node is in (from == to) records nothing. prov is checked before
// anything is read (the zero Provenance is invalid).
func (s *Owner) SetNodeState(ctx context.Context, id uuid.UUID, from, to NodeState, prov Provenance, eventID uuid.UUID) (Node, error) {
	const op = "set node state"
	switch {
	case prov.valid() != nil:
		return Node{}, fmt.Errorf("%s: %w", op, prov.valid())
	case !from.Valid():
		return Node{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("from", "unknown node state"))
	case !to.Valid():
		return Node{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("to", "unknown node state"))
	case from == NodeRemoved && to != NodeRemoved:
		return Node{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("to", "a removed node is final"))
	case to == NodeEnrolled && from != NodeEnrolled:
		return Node{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("to", "a node never returns to enrolled"))
	}
	var row db.Node
	moved := false
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		var err error
		row, err = q.SetNodeState(ctx, db.SetNodeStateParams{ID: id, FromState: string(from), ToState: string(to)})
		moved = errors.Is(err, pgx.ErrNoRows)
		switch {
		case moved:
			return nil
		case err != nil || from == to:
			return err
		}
		return recordNodeState(ctx, q, prov, eventID, id, from, to, nil)
	})
	if err == nil && moved {
		if _, err := s.q.GetNode(ctx, id); err != nil {
			return Node{}, wrap(op, err)
		}
		return Node{}, fmt.Errorf("%s: node is no longer %s: %w", op, from, errdefs.ErrFenced)
	}
	if err != nil {
		return Node{}, wrap(op, err)
	}
	// Core connects to (or lets go of) the node at once, not at its next
	// reconcile. The state change stands whether or not the notification
	// goes out: the reconcile is the safety net.
	_ = notifyNodeWork(ctx, s.q, id)
	return nodeFromRow(row), nil
}

// nodeActions names the decision of a move to each state.
var nodeActions = map[NodeState]string{
	NodeEnabled: "node.enable", NodeRetired: "node.retire", NodeRemoved: "node.remove",
}

// recordNodeState records node id's move from from to to (node.enable,
// node.retire, node.remove) on q, with the state it left and extra detail.
func recordNodeState(ctx context.Context, q *db.Queries, prov Provenance, eventID, id uuid.UUID, from, to NodeState, extra map[string]any) error {
	action, ok := nodeActions[to]
	if !ok {
		return errdefs.Invalid("to", "no decision moves a node to "+string(to))
	}
	detail := map[string]any{"from_state": string(from)}
	for k, v := range extra {
		detail[k] = v
	}
	return recordAudit(ctx, q, prov, AuditEntry{
		ID: eventID, Kind: AuditDecision, Action: action, Resource: "nodes/" + id.String(), Outcome: "ok", Detail: detail,
	})
}

func nodeFromRow(r db.Node) Node {
	return Node{
		ID:                     r.ID,
		AdvertiseAddress:       r.AdvertiseAddress,
		CertificateDER:         r.CertificateDER,
		CertificateFingerprint: r.CertificateFingerprint,
		PublicKeyHash:          r.PublicKeyHash,
		State:                  NodeState(r.State),
		CreatedAt:              r.CreatedAt,
		UpdatedAt:              r.UpdatedAt,
	}
}

// NodeLoad is what a node holds: Active environments (placements and
// unreleased allocations that are not suspended, which placement compares
// with max_active and the node's capacity) and Retained suspended
// snapshots (compared with max_retained).
type NodeLoad struct {
	Active, Retained int64
}

// NodeLoads returns the load of each of the nodes ids (a node with no row
// holds nothing and is left out).
func (s *Reader) NodeLoads(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]NodeLoad, error) {
	rows, err := s.q.ListNodeLoads(ctx, ids)
	if err != nil {
		return nil, wrap("node loads", err)
	}
	out := make(map[uuid.UUID]NodeLoad, len(rows))
	for _, r := range rows {
		out[r.NodeID] = NodeLoad{Active: r.Held, Retained: r.Retained}
	}
	return out, nil
}
