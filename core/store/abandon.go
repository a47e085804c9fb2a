package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// FailureNodeAbandoned is the failure code of an Environment ended by an
// operator's abandon of its node (Owner.AbandonNode).
const FailureNodeAbandoned = "node_abandoned"

// ActionRemoveNodeAbandon is the operator action an abandonment records:
// RemoveNode with abandon.
const ActionRemoveNodeAbandon = "remove_node_abandon"

// diagnosticBackendMismatch is the presence diagnostic of a node whose
// agent serves another backend than the one it is bound to (core/nodes
// records it; DiagnosticBackendFingerprintMismatch there).
const diagnosticBackendMismatch = "backend_fingerprint_mismatch"

// NodeAbandonment is the durable record of a node removed by abandoning
// what it held: the audit of the operator action (migration 0019).
type NodeAbandonment struct {
	NodeID uuid.UUID
	// Action is the operator action (ActionRemoveNodeAbandon).
	Action string
	// BackendFingerprint is the abandoned backend: the node's binding.
	BackendFingerprint string
	// OwnerEpoch is the epoch of the Core that wrote it.
	OwnerEpoch uint64
	// AbandonedAt is the database time of the commit.
	AbandonedAt time.Time
	// Allocations are the abandoned allocations, in id order.
	Allocations []AbandonedAllocation
	// Reservations are the Environments that held only a reservation on
	// the node, with their Sessions.
	Reservations []AbandonedReservation
	// Terminations are the terminal cleanups the abandonment committed,
	// for whoever waits on what they changed (only from AbandonNode
	// itself; GetNodeAbandonment leaves it empty).
	Terminations []Termination
}

// AbandonedAllocation is one allocation released without cleanup, and what
// of it may remain on the abandoned backend.
type AbandonedAllocation struct {
	AllocationID  uuid.UUID
	EnvironmentID uuid.UUID
	SessionID     uuid.UUID
	// ProviderID is the native id its Create settled with ("" if none).
	ProviderID string
	// Computes are its other incarnations: the one it ran as after a
	// restore, and those cleanup still owed.
	Computes []AbandonedResource
	// Snapshots are its snapshots: the one it was suspended into, and
	// those cleanup still owed.
	Snapshots []AbandonedResource
}

// AbandonedResource is one native resource an abandonment names: its
// identity (an incarnation's name, a snapshot's id) and, when known, its
// native id.
type AbandonedResource struct {
	Identity string
	NativeID string
}

// AbandonedReservation is an Environment whose node held only its
// reservation (no allocation, so nothing on any engine).
type AbandonedReservation struct {
	EnvironmentID uuid.UUID
	SessionID     uuid.UUID
}

// AbandonNode removes retired node nodeID by abandoning everything it
// holds on the backend it is bound to, in one transaction under the owner
// fence (ErrSuperseded otherwise):
//
//   - the node must still be retired, bound to exactly fingerprint, and
//     its latest presence record must carry the diagnostic
//     backend_fingerprint_mismatch (its agent came back on another
//     backend); the caller decided on those, and anything else now is
//     ErrFenced (read again and decide again), with nothing written;
//   - every Environment the node holds goes through terminal cleanup as
//     failed with FailureNodeAbandoned (devices revoked, queued Turns
//     settled, the running one asked to cancel), its Session locked first,
//     in Session order;
//   - every unreleased allocation of the node is released without cleanup
//     (abandoned_at: neither its cleanup nor its creation is proven, and
//     the schema admits that release only so), with its owed leftovers
//     left undeleted, and every unreleased placement on it is released;
//   - the abandonment and exactly what it abandoned are recorded
//     (NodeAbandonment), and the node is removed.
//
// The same transaction records the decision in the audit trail
// (node.abandon, by prov, event id eventID, with the counts of what it
// released and ended). prov is checked before anything is read (the zero
// Provenance is invalid).
//
// ErrNotFound when there is no such node; ErrInvalid for a malformed
// fingerprint.
func (s *Owner) AbandonNode(ctx context.Context, nodeID uuid.UUID, fingerprint string, prov Provenance, eventID uuid.UUID) (NodeAbandonment, error) {
	const op = "abandon node"
	if err := prov.valid(); err != nil {
		return NodeAbandonment{}, fmt.Errorf("%s: %w", op, err)
	}
	if fingerprint == "" || len(fingerprint) > MaxBackendFingerprint {
		return NodeAbandonment{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("backend_fingerprint", "required, at most 256 bytes"))
	}
	epoch, err := epochParam(s.epoch)
	if err != nil {
		return NodeAbandonment{}, fmt.Errorf("%s: %w", op, ErrSuperseded)
	}
	var out NodeAbandonment
	err = s.ownedTx(ctx, func(q *db.Queries) error {
		if err := lockAbandonable(ctx, q, nodeID, fingerprint); err != nil {
			return err
		}
		held, err := q.ListNodeHeldEnvironments(ctx, nodeID)
		if err != nil {
			return err
		}
		if out.Terminations, out.Reservations, err = terminateHeld(ctx, q, nodeID, held); err != nil {
			return err
		}
		leftovers, err := q.ListNodeOwedLeftovers(ctx, nodeID)
		if err != nil {
			return err
		}
		rows, err := q.AbandonNodeAllocations(ctx, nodeID)
		if err != nil {
			return err
		}
		if err := q.ReleaseNodePlacements(ctx, nodeID); err != nil {
			return err
		}
		out.Allocations = abandonedAllocations(held, rows, leftovers)
		if err := recordAbandonment(ctx, q, &out, nodeID, fingerprint, epoch); err != nil {
			return err
		}
		return recordAudit(ctx, q, prov, AuditEntry{
			ID: eventID, Kind: AuditDecision, Action: "node.abandon", Resource: "nodes/" + nodeID.String(), Outcome: "ok",
			Detail: map[string]any{
				"allocations_released":  len(out.Allocations),
				"reservations_released": len(out.Reservations),
				"environments_failed":   len(out.Terminations),
			},
		})
	})
	if err != nil {
		return NodeAbandonment{}, wrap(op, err)
	}
	return out, nil
}

// lockAbandonable locks node nodeID and checks, under the lock, what the
// caller decided on: the node is still retired, bound to exactly
// fingerprint, and its latest presence record carries
// backend_fingerprint_mismatch. Anything else is ErrFenced (read again and
// decide again).
func lockAbandonable(ctx context.Context, q *db.Queries, nodeID uuid.UUID, fingerprint string) error {
	n, err := q.LockNode(ctx, nodeID)
	if err != nil {
		return err
	}
	if NodeState(n.State) != NodeRetired {
		return fmt.Errorf("node is %s, not retired: %w", n.State, errdefs.ErrFenced)
	}
	bound, err := q.GetNodeBackend(ctx, nodeID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && bound != fingerprint) {
		return fmt.Errorf("node is not bound to the named backend: %w", errdefs.ErrFenced)
	}
	if err != nil {
		return err
	}
	diag, err := q.LockNodePresenceDiagnostic(ctx, nodeID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && diag != diagnosticBackendMismatch) {
		return fmt.Errorf("node is not recorded on another backend: %w", errdefs.ErrFenced)
	}
	return err
}

// terminateHeld ends every Environment the node holds as failed
// (FailureNodeAbandoned), each Session locked first as every terminal
// cleanup takes it, in the order held lists them. It returns the
// terminations and the Environments that held only a reservation.
func terminateHeld(ctx context.Context, q *db.Queries, nodeID uuid.UUID, held []db.ListNodeHeldEnvironmentsRow) ([]Termination, []AbandonedReservation, error) {
	var terminations []Termination
	var reservations []AbandonedReservation
	// Every Session first, in Session order, then the projects' load rows
	// in project order, before the first write takes a node's row: the
	// writes below change Environments of several projects, and the lock
	// order is project row before node row (migration 0024).
	for _, h := range held {
		if _, err := q.LockSession(ctx, h.SessionID); err != nil {
			return nil, nil, err
		}
	}
	if err := q.LockNodeProjectLoads(ctx, nodeID); err != nil {
		return nil, nil, err
	}
	for _, h := range held {
		t, err := terminate(ctx, q, h.EnvironmentID, TerminalFailed, FailureNodeAbandoned)
		if err != nil {
			return nil, nil, err
		}
		terminations = append(terminations, t)
		if !h.Allocated {
			reservations = append(reservations, AbandonedReservation{EnvironmentID: h.EnvironmentID, SessionID: h.SessionID})
		}
	}
	return terminations, reservations, nil
}

// abandonedAllocations says exactly what the abandoned allocations leave on
// the backend: each one's native id, current incarnation and snapshot,
// and the owed leftovers (each identity once), in id order.
func abandonedAllocations(held []db.ListNodeHeldEnvironmentsRow, rows []db.Allocation, leftovers []db.AllocationLeftover) []AbandonedAllocation {
	sessionOf := make(map[uuid.UUID]uuid.UUID, len(held))
	for _, h := range held {
		sessionOf[h.EnvironmentID] = h.SessionID
	}
	var out []AbandonedAllocation
	byID := make(map[uuid.UUID]int, len(rows))
	for _, r := range rows {
		a := allocationFromRow(r)
		aa := AbandonedAllocation{AllocationID: a.ID, EnvironmentID: a.EnvironmentID, SessionID: sessionOf[a.EnvironmentID], ProviderID: a.ProviderID}
		if a.ComputeName != "" {
			aa.Computes = append(aa.Computes, AbandonedResource{Identity: a.ComputeName, NativeID: a.ComputeID})
		}
		if id := a.Suspension.Snapshot.ID; id != "" {
			aa.Snapshots = append(aa.Snapshots, AbandonedResource{Identity: id})
		}
		byID[a.ID] = len(out)
		out = append(out, aa)
	}
	for _, l := range leftovers {
		i, ok := byID[l.AllocationID]
		if !ok {
			continue
		}
		r := AbandonedResource{Identity: l.Identity, NativeID: l.NativeID.String}
		if l.Kind == "compute" {
			out[i].Computes = appendResource(out[i].Computes, r)
		} else {
			out[i].Snapshots = appendResource(out[i].Snapshots, r)
		}
	}
	sortAbandoned(out)
	return out
}

// recordAbandonment writes the audit of the abandonment into out's
// record and resources (completing out from the inserted row), removes
// the node and tells Core to let go of it at once (its connection and
// worker).
func recordAbandonment(ctx context.Context, q *db.Queries, out *NodeAbandonment, nodeID uuid.UUID, fingerprint string, epoch int64) error {
	rec, err := q.InsertNodeAbandonment(ctx, db.InsertNodeAbandonmentParams{
		NodeID: nodeID, Action: ActionRemoveNodeAbandon, BackendFingerprint: fingerprint, OwnerEpoch: epoch,
	})
	if err != nil {
		return err
	}
	out.NodeID, out.Action, out.BackendFingerprint = rec.NodeID, rec.Action, rec.BackendFingerprint
	out.OwnerEpoch, out.AbandonedAt = uint64(rec.OwnerEpoch), rec.AbandonedAt
	for _, r := range abandonedRows(*out) {
		if err := q.InsertNodeAbandonedResource(ctx, r); err != nil {
			return err
		}
	}
	if _, err := q.SetNodeState(ctx, db.SetNodeStateParams{ID: nodeID, FromState: string(NodeRetired), ToState: string(NodeRemoved)}); err != nil {
		return err
	}
	return notifyNodeWork(ctx, q, nodeID)
}

// appendResource appends r unless list names its identity already.
func appendResource(list []AbandonedResource, r AbandonedResource) []AbandonedResource {
	for i, have := range list {
		if have.Identity == r.Identity {
			if have.NativeID == "" {
				list[i].NativeID = r.NativeID
			}
			return list
		}
	}
	return append(list, r)
}

// sortAbandoned puts the allocations in id order (the database's uuid
// order: byte-wise).
func sortAbandoned(as []AbandonedAllocation) {
	slices.SortFunc(as, func(a, b AbandonedAllocation) int { return bytes.Compare(a.AllocationID[:], b.AllocationID[:]) })
}

// abandonedRows are the node_abandoned_resources rows of a.
func abandonedRows(a NodeAbandonment) []db.InsertNodeAbandonedResourceParams {
	text := func(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }
	var rows []db.InsertNodeAbandonedResourceParams
	for _, al := range a.Allocations {
		id := al.AllocationID
		row := func(kind string, r AbandonedResource) db.InsertNodeAbandonedResourceParams {
			return db.InsertNodeAbandonedResourceParams{
				NodeID: a.NodeID, Kind: kind, Identity: r.Identity, AllocationID: &id,
				EnvironmentID: al.EnvironmentID, SessionID: al.SessionID, NativeID: text(r.NativeID),
			}
		}
		rows = append(rows, row("allocation", AbandonedResource{Identity: id.String(), NativeID: al.ProviderID}))
		for _, c := range al.Computes {
			rows = append(rows, row("compute", c))
		}
		for _, sn := range al.Snapshots {
			rows = append(rows, row("snapshot", sn))
		}
	}
	for _, r := range a.Reservations {
		rows = append(rows, db.InsertNodeAbandonedResourceParams{
			NodeID: a.NodeID, Kind: "reservation", Identity: r.EnvironmentID.String(),
			EnvironmentID: r.EnvironmentID, SessionID: r.SessionID,
		})
	}
	return rows
}

// GetNodeAbandonment returns the abandonment recorded for node nodeID,
// with what it abandoned; ErrNotFound when the node was never abandoned.
func (s *Reader) GetNodeAbandonment(ctx context.Context, nodeID uuid.UUID) (NodeAbandonment, error) {
	const op = "get node abandonment"
	rec, err := s.q.GetNodeAbandonment(ctx, nodeID)
	if err != nil {
		return NodeAbandonment{}, wrap(op, err)
	}
	rows, err := s.q.ListNodeAbandonedResources(ctx, nodeID)
	if err != nil {
		return NodeAbandonment{}, wrap(op, err)
	}
	out := NodeAbandonment{
		NodeID: rec.NodeID, Action: rec.Action, BackendFingerprint: rec.BackendFingerprint,
		OwnerEpoch: uint64(rec.OwnerEpoch), AbandonedAt: rec.AbandonedAt,
	}
	byID := map[uuid.UUID]int{}
	for _, r := range rows {
		if r.AllocationID == nil {
			out.Reservations = append(out.Reservations, AbandonedReservation{EnvironmentID: r.EnvironmentID, SessionID: r.SessionID})
			continue
		}
		i, ok := byID[*r.AllocationID]
		if !ok {
			i = len(out.Allocations)
			byID[*r.AllocationID] = i
			out.Allocations = append(out.Allocations, AbandonedAllocation{AllocationID: *r.AllocationID, EnvironmentID: r.EnvironmentID, SessionID: r.SessionID})
		}
		res := AbandonedResource{Identity: r.Identity, NativeID: r.NativeID.String}
		switch r.Kind {
		case "allocation":
			out.Allocations[i].ProviderID = r.NativeID.String
		case "compute":
			out.Allocations[i].Computes = append(out.Allocations[i].Computes, res)
		case "snapshot":
			out.Allocations[i].Snapshots = append(out.Allocations[i].Snapshots, res)
		}
	}
	sortAbandoned(out.Allocations)
	return out, nil
}

// NodeBackends returns the bindings of those of the nodes ids that are
// bound (Owner.BindNodeBackend).
func (s *Reader) NodeBackends(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	rows, err := s.q.ListNodeBackends(ctx, ids)
	if err != nil {
		return nil, wrap("list node backends", err)
	}
	out := make(map[uuid.UUID]string, len(rows))
	for _, r := range rows {
		out[r.NodeID] = r.BackendFingerprint
	}
	return out, nil
}
