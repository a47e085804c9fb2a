package nodes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/events"
	"berth.dev/core/store"
)

// RegistryStore is what the Registry reads and writes: node records and
// the compare-and-swap of their state, what a node holds, and the tokens
// that enrolled them (no write here is fenced by the owner epoch).
type RegistryStore interface {
	GetNode(ctx context.Context, id uuid.UUID) (store.Node, error)
	ListNodesByAge(ctx context.Context, limit int, after store.NodeCursor, includeRemoved bool) ([]store.Node, error)
	SetNodeState(ctx context.Context, id uuid.UUID, from, to store.NodeState, prov store.Provenance, eventID uuid.UUID) (store.Node, error)
	NodeHolds(ctx context.Context, nodeID uuid.UUID) (bool, error)
	EnrollmentTokensOfNodes(ctx context.Context, nodeIDs []uuid.UUID) (map[uuid.UUID]string, error)
	NodeLoads(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]store.NodeLoad, error)
	// NodeBackends gives the backend each node is bound to.
	NodeBackends(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]string, error)
	// CurrentGeneration gives the limits a node's load is compared with
	// (errdefs.ErrNotFound before the first commit).
	CurrentGeneration(ctx context.Context) (store.Generation, error)
}

// Node is a node as the Registry shows it: the stored record and the
// enrollment token it enrolled with.
//
// It carries no presence, readiness or capacity: those are what the
// Manager's live connections observe, and an adapter adds them; for a node
// Core holds no connection loop for, they are unknown rather than
// reported as anything not observed.
type Node struct {
	store.Node
	// EnrollmentTokenID is the id of the token that enrolled the node,
	// empty when no token records it.
	EnrollmentTokenID string
	// Load is what the node holds (the database's count).
	Load store.NodeLoad
	// Limits are the committed generation's per-node limits and
	// per-sandbox resources; nil before the first commit.
	Limits *sandbox.Specification
	// BackendFingerprint is the native backend the node is bound to
	// (store.Owner.BindNodeBackend); "" before it first served the
	// committed generation.
	BackendFingerprint string
}

// Reasons a node has no room for one more sandbox of the committed
// generation (NoRoom), in the order placement applies its bounds.
const (
	NoRoomMaxActive = "max_active"
	NoRoomCPU       = "cpu"
	NoRoomMemory    = "memory"
	NoRoomDisk      = "disk"
)

// NoRoom says why a node holding load, which reported cpu millis, memory
// and free disk bytes, has no room for one more sandbox of limits: the
// first bound it reaches (NoRoomMaxActive, NoRoomCPU, NoRoomMemory,
// NoRoomDisk), or "" when one fits. It is ChoosePlacementNode's rule
// (store): a node holds fewer than max_active and fewer than each reported
// figure divided by the per-sandbox need (a zero need bounds nothing).
// Placement also needs the node enabled, present and ready for the
// generation: its readiness says that.
func NoRoom(limits sandbox.Specification, load store.NodeLoad, cpu, memory, disk int64) string {
	fits := func(have, need int64) bool { return need <= 0 || load.Active < have/need }
	switch {
	case load.Active >= int64(limits.MaxActive):
		return NoRoomMaxActive
	case !fits(cpu, limits.Resources.CPUMillis):
		return NoRoomCPU
	case !fits(memory, limits.Resources.MemoryBytes):
		return NoRoomMemory
	case !fits(disk, limits.Resources.DiskBytes):
		return NoRoomDisk
	}
	return ""
}

// The refusals of the node state changes: each tells the operator what to
// do, with a fixed reason and message.
var (
	errNodeRemoved = errdefs.Refuse(errdefs.ErrFailedPrecondition, "node_removed",
		"node is removed: enroll the host again with a new enrollment token")
	errNodeEnabled = errdefs.Refuse(errdefs.ErrFailedPrecondition, "node_enabled",
		"node is enabled: retire it first")
	errNodeHolds = errdefs.Refuse(errdefs.ErrFailedPrecondition, "node_holds_allocations",
		"node still holds allocations, reservations or cleanup: delete its sessions and wait until their cleanup is confirmed")
)

// casAttempts bounds how often a state change that lost a race is read
// and decided again before the caller gets the conflict (errdefs.ErrFenced).
const casAttempts = 3

// Registry is the administrative lifecycle of nodes: it lists and reads
// the enrolled nodes and enables, retires and removes them.
type Registry struct {
	store RegistryStore
	// gate guards each retirement and abandonment; nil runs it bare.
	gate RetireGate
	// abandons, log and bus serve Abandon; a nil abandons refuses it.
	abandons AbandonStore
	log      *slog.Logger
	bus      *events.Bus
}

// RegistryOptions are what a Registry depends on beyond its store, fixed
// at construction.
type RegistryOptions struct {
	// Gate runs every retirement of an enrolled or enabled node, and
	// every abandonment (nil: run bare).
	Gate RetireGate
	// Abandons serves Abandon (nil: refused, abandon_unavailable).
	Abandons AbandonStore
	// Log records each abandonment (nil: discarded).
	Log *slog.Logger
	// Events is told what each abandonment's terminal cleanups changed
	// (events.Terminated), so the Sessions' gateway connections forward
	// the cancellations at once.
	Events *events.Bus
}

// RetireGate runs retire, the compare-and-swap that retires nodes (one
// node here), through the lifecycle drain gate (Core passes
// lifecycle.Coordinator.Gate, as it does to a deployment replacement): it
// drains the nodes' lifecycle workers between operations within its
// bound, runs retire, and starts new workers. When the drain passes its
// bound it must not run retire and returns ErrRetireUndrained.
type RetireGate func(ctx context.Context, nodes []uuid.UUID, retire func() error) error

// ErrRetireUndrained refuses a retirement whose node's lifecycle worker
// did not reach the end of its operation in flight within the drain
// bound: the node was not retired, and Core closed admission (an owner
// failure) until it restarts.
var ErrRetireUndrained error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "owner_failure",
	"node not retired: its lifecycle worker did not drain in time and Core closed admission: restart berth-core, then retire the node again")

// NewRegistry returns the node registry over st.
func NewRegistry(st RegistryStore, opts RegistryOptions) (*Registry, error) {
	if st == nil {
		return nil, errors.New("nodes: registry has no store")
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{store: st, gate: opts.Gate, abandons: opts.Abandons, log: log, bus: opts.Events}, nil
}

// List returns up to limit (1 to store.MaxPageSize+1) nodes after
// position after (the zero cursor is the start), in enrollment order:
// creation time, then id. Removed nodes
// are listed only with includeRemoved.
func (r *Registry) List(ctx context.Context, after store.NodeCursor, limit int, includeRemoved bool) ([]Node, error) {
	page, err := r.store.ListNodesByAge(ctx, limit, after, includeRemoved)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes, err := r.withTokens(ctx, page...)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return nodes, nil
}

// Get returns node id.
func (r *Registry) Get(ctx context.Context, id uuid.UUID) (Node, error) {
	n, err := r.store.GetNode(ctx, id)
	if err != nil {
		return Node{}, fmt.Errorf("get node: %w", err)
	}
	nodes, err := r.withTokens(ctx, n)
	if err != nil {
		return Node{}, fmt.Errorf("get node: %w", err)
	}
	return nodes[0], nil
}

// Enable admits node id to placement: an enrolled or retired node becomes
// enabled, an enabled one comes back unchanged, a removed one is refused
// (node_removed). prov is who decided (audit.From of the admin call): a
// change records node.enable in its own transaction.
func (r *Registry) Enable(ctx context.Context, id uuid.UUID, prov store.Provenance) (Node, error) {
	return r.transition(ctx, "enable node", id, prov, toUnlessRemoved(store.NodeEnabled))
}

// Retire stops new placement on node id: an enrolled or enabled node
// becomes retired (what it holds stays owned and observed), a retired one
// comes back unchanged, a removed one is refused (node_removed). The
// change runs through the retirement gate (RegistryOptions.Gate), so when it
// commits no lifecycle operation on the node begun before it is still in
// flight; a gate whose drain passed its bound leaves the node as it was
// (ErrRetireUndrained, reason owner_failure). A change records
// node.retire by prov.
func (r *Registry) Retire(ctx context.Context, id uuid.UUID, prov store.Provenance) (Node, error) {
	const op = "retire node"
	retire := toUnlessRemoved(store.NodeRetired)
	if r.gate == nil {
		return r.transition(ctx, op, id, prov, retire)
	}
	cur, err := r.store.GetNode(ctx, id)
	if err != nil {
		return Node{}, fmt.Errorf("%s: %w", op, err)
	}
	if cur.State == store.NodeRetired || cur.State == store.NodeRemoved {
		// Nothing to drain: unchanged, or refused (node_removed).
		return r.transition(ctx, op, id, prov, retire)
	}
	var n Node
	err = r.gate(ctx, []uuid.UUID{id}, func() error {
		var err error
		n, err = r.transition(ctx, op, id, prov, retire)
		return err
	})
	if err != nil {
		return Node{}, err
	}
	return n, nil
}

// toUnlessRemoved decides a move to state to from any state but removed,
// which is refused (node_removed).
func toUnlessRemoved(to store.NodeState) func(store.NodeState) (store.NodeState, error) {
	return func(cur store.NodeState) (store.NodeState, error) {
		if cur == store.NodeRemoved {
			return "", errNodeRemoved
		}
		return to, nil
	}
}

// Remove removes node id for good: an enrolled or retired node that holds
// nothing becomes removed, a removed one comes back unchanged. An enabled
// node is refused (node_enabled: retire it first), and so is one that
// still holds an unreleased allocation or placement, whatever its state of
// creation or cleanup (node_holds_allocations, store.NodeHolds): offline
// ownership is kept. A suspended allocation's snapshot is its allocation's
// (unreleased), and a fork's seed not yet discarded counts too. The check runs before the state's compare-and-swap, not in its
// transaction: placement only chooses enabled nodes, so what an enrolled
// or retired node holds can only shrink. The removed node keeps its
// identity, so its certificate stays refused. A change records
// node.remove by prov.
func (r *Registry) Remove(ctx context.Context, id uuid.UUID, prov store.Provenance) (Node, error) {
	return r.transition(ctx, "remove node", id, prov, func(cur store.NodeState) (store.NodeState, error) {
		switch cur {
		case store.NodeRemoved:
			return store.NodeRemoved, nil
		case store.NodeEnrolled, store.NodeRetired:
			// Placement only chooses enabled nodes, so what a retired or
			// merely enrolled node holds can only shrink: checking before
			// the compare-and-swap cannot miss a new reservation.
			holds, err := r.store.NodeHolds(ctx, id)
			if err != nil {
				return "", err
			}
			if holds {
				return "", errNodeHolds
			}
			return store.NodeRemoved, nil
		}
		return "", errNodeEnabled
	})
}

// transition reads node id, asks decide for the state to move it to and
// moves it by compare-and-swap. A node already in that state comes back
// unchanged. When another change won the race (errdefs.ErrFenced), the
// node is read and decided again, up to casAttempts times.
func (r *Registry) transition(ctx context.Context, op string, id uuid.UUID, prov store.Provenance, decide func(store.NodeState) (store.NodeState, error)) (Node, error) {
	for attempt := 1; ; attempt++ {
		n, err := r.store.GetNode(ctx, id)
		if err != nil {
			return Node{}, fmt.Errorf("%s: %w", op, err)
		}
		to, err := decide(n.State)
		if err != nil {
			return Node{}, fmt.Errorf("%s: %w", op, err)
		}
		if to != n.State {
			eventID, err := uuid.NewRandom()
			if err != nil {
				return Node{}, fmt.Errorf("%s: %w", op, err)
			}
			n, err = r.store.SetNodeState(ctx, id, n.State, to, prov, eventID)
			if errdefs.IsFenced(err) && attempt < casAttempts {
				continue
			}
			if err != nil {
				return Node{}, fmt.Errorf("%s: %w", op, err)
			}
		}
		nodes, err := r.withTokens(ctx, n)
		if err != nil {
			return Node{}, fmt.Errorf("%s: %w", op, err)
		}
		return nodes[0], nil
	}
}

// withTokens adds to each node the enrolling token's id, what it holds and
// the committed limits.
func (r *Registry) withTokens(ctx context.Context, nodes ...store.Node) ([]Node, error) {
	ids := make([]uuid.UUID, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	tokens, err := r.store.EnrollmentTokensOfNodes(ctx, ids)
	if err != nil {
		return nil, err
	}
	loads, err := r.store.NodeLoads(ctx, ids)
	if err != nil {
		return nil, err
	}
	backends, err := r.store.NodeBackends(ctx, ids)
	if err != nil {
		return nil, err
	}
	var limits *sandbox.Specification
	switch g, err := r.store.CurrentGeneration(ctx); {
	case err == nil:
		limits = &g.Specification
	case !errdefs.IsNotFound(err):
		return nil, err
	}
	out := make([]Node, len(nodes))
	for i, n := range nodes {
		out[i] = Node{Node: n, EnrollmentTokenID: tokens[n.ID], Load: loads[n.ID], Limits: limits, BackendFingerprint: backends[n.ID]}
	}
	return out, nil
}

// AbandonStore is what an abandonment reads and writes: the node's
// binding and latest presence, its recorded abandonment, and the
// abandonment itself, a lifecycle write under Core's owner epoch
// (store.Owner.AbandonNode).
type AbandonStore interface {
	NodeBackend(ctx context.Context, nodeID uuid.UUID) (string, error)
	GetNodePresence(ctx context.Context, nodeID uuid.UUID) (store.NodePresence, error)
	GetNodeAbandonment(ctx context.Context, nodeID uuid.UUID) (store.NodeAbandonment, error)
	AbandonNode(ctx context.Context, nodeID uuid.UUID, fingerprint string, prov store.Provenance, eventID uuid.UUID) (store.NodeAbandonment, error)
}

// The refusals of an abandonment: each says what holds and what to do.
var (
	errAbandonUnavailable = errdefs.Refuse(errdefs.ErrFailedPrecondition, "abandon_unavailable",
		"this Core does not abandon nodes: delete the node's Sessions and wait for their cleanup")
	errAbandonNotBound = errdefs.Refuse(errdefs.ErrFailedPrecondition, "abandon_backend_not_bound",
		"abandon must name the backend the node is bound to (GetNode backend_fingerprint); nothing was abandoned")
	errAbandonNotMismatched = errdefs.Refuse(errdefs.ErrFailedPrecondition, "node_backend_not_mismatched",
		"the node is not back on another backend, so it keeps what it holds: start its agent on the new engine first, then abandon")
	errAbandonUndrained = errdefs.Refuse(errdefs.ErrFailedPrecondition, "owner_failure",
		"node not abandoned: its worker did not drain in time and admission is closed: restart berth-core, then abandon again")
)

// Abandon removes node id by abandoning everything it holds on the
// backend it is bound to: the explicit, audited operator action for a
// host that really moved to another engine. It is refused unless the node
// is retired (node_enabled: retire it first), fingerprint is the backend
// it is bound to (abandon_backend_not_bound) and its agent came back on
// another backend: its latest presence record carries
// backend_fingerprint_mismatch (node_backend_not_mismatched; a node that
// is only offline keeps what it holds, as the guide requires). It runs
// through the retirement gate (no lifecycle operation on the node is in
// flight when it commits), then store.Owner.AbandonNode ends every
// Environment the node holds as failed (node_abandoned), releases its
// allocations and reservations without cleanup, records the abandonment
// and removes the node, in one transaction. The abandonment is logged
// and returned. A removed node comes back unchanged, with the
// abandonment recorded for it (nil when it was removed without one).
// prov is who decided (audit.From of the admin call): the abandonment
// records node.abandon in its own transaction.
func (r *Registry) Abandon(ctx context.Context, id uuid.UUID, fingerprint string, prov store.Provenance) (Node, *store.NodeAbandonment, error) {
	const op = "abandon node"
	if r.abandons == nil {
		return Node{}, nil, fmt.Errorf("%s: %w", op, errAbandonUnavailable)
	}
	if fingerprint == "" || len(fingerprint) > store.MaxBackendFingerprint {
		return Node{}, nil, fmt.Errorf("%s: %w", op, errdefs.Invalid("abandon.backend_fingerprint", "required, at most 256 bytes"))
	}
	for attempt := 1; ; attempt++ {
		cur, err := r.store.GetNode(ctx, id)
		if err != nil {
			return Node{}, nil, fmt.Errorf("%s: %w", op, err)
		}
		switch cur.State {
		case store.NodeRemoved:
			n, ab, err := r.removedWithAbandonment(ctx, cur)
			if err != nil {
				return Node{}, nil, fmt.Errorf("%s: %w", op, err)
			}
			return n, ab, nil
		case store.NodeEnabled:
			return Node{}, nil, fmt.Errorf("%s: %w", op, errNodeEnabled)
		}
		if err := r.checkAbandonable(ctx, id, fingerprint); err != nil {
			return Node{}, nil, fmt.Errorf("%s: %w", op, err)
		}
		ab, err := r.abandonThroughGate(ctx, id, fingerprint, prov)
		if errors.Is(err, ErrRetireUndrained) {
			return Node{}, nil, fmt.Errorf("%s: %w", op, errAbandonUndrained)
		}
		if errdefs.IsFenced(err) && !errors.Is(err, store.ErrSuperseded) && attempt < casAttempts {
			continue // the node moved on meanwhile: decide again
		}
		if err != nil {
			return Node{}, nil, fmt.Errorf("%s: %w", op, err)
		}
		r.logAbandonment(ab)
		for _, t := range ab.Terminations {
			r.bus.Publish(events.Terminated(t.SessionID, t.SettledTurns, t.CancelRequested)...)
		}
		n, err := r.Get(ctx, id)
		if err != nil {
			return Node{}, nil, fmt.Errorf("%s: %w", op, err)
		}
		return n, &ab, nil
	}
}

// removedWithAbandonment answers Abandon for a node already removed: the
// node unchanged, with the abandonment recorded for it (nil when it was
// removed without one), so a repeated Abandon whose answer was lost learns
// what the first one did.
func (r *Registry) removedWithAbandonment(ctx context.Context, cur store.Node) (Node, *store.NodeAbandonment, error) {
	ab, err := r.Abandonment(ctx, cur.ID)
	if err != nil {
		return Node{}, nil, err
	}
	n, err := r.withTokens(ctx, cur)
	if err != nil {
		return Node{}, nil, err
	}
	return n[0], ab, nil
}

// checkAbandonable refuses to abandon node id unless fingerprint is the
// backend it is bound to (abandon_backend_not_bound) and its latest
// presence record says its agent came back on another backend
// (node_backend_not_mismatched): a node that is only offline keeps what it
// holds.
func (r *Registry) checkAbandonable(ctx context.Context, id uuid.UUID, fingerprint string) error {
	switch bound, err := r.abandons.NodeBackend(ctx, id); {
	case errdefs.IsNotFound(err), err == nil && bound != fingerprint:
		return errAbandonNotBound
	case err != nil:
		return err
	}
	switch p, err := r.abandons.GetNodePresence(ctx, id); {
	case errdefs.IsNotFound(err), err == nil && p.DiagnosticCode != DiagnosticBackendFingerprintMismatch:
		return errAbandonNotMismatched
	case err != nil:
		return err
	}
	return nil
}

// abandonThroughGate runs store.Owner.AbandonNode through the retirement
// gate when there is one, so no lifecycle operation on the node is in
// flight when the abandonment commits.
func (r *Registry) abandonThroughGate(ctx context.Context, id uuid.UUID, fingerprint string, prov store.Provenance) (store.NodeAbandonment, error) {
	var ab store.NodeAbandonment
	abandon := func() error {
		eventID, err := uuid.NewRandom()
		if err != nil {
			return err
		}
		ab, err = r.abandons.AbandonNode(ctx, id, fingerprint, prov, eventID)
		return err
	}
	var err error
	if r.gate != nil {
		err = r.gate(ctx, []uuid.UUID{id}, abandon)
	} else {
		err = abandon()
	}
	return ab, err
}

// Abandonment returns the abandonment recorded for node id, nil when it
// was never abandoned (or abandoning is not allowed here).
func (r *Registry) Abandonment(ctx context.Context, id uuid.UUID) (*store.NodeAbandonment, error) {
	if r.abandons == nil {
		return nil, nil
	}
	ab, err := r.abandons.GetNodeAbandonment(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &ab, nil
}

// logAbandonment writes the operator action's log line: the node, the
// abandoned backend and exactly what was abandoned (Berth ids).
func (r *Registry) logAbandonment(ab store.NodeAbandonment) {
	allocations := make([]string, len(ab.Allocations))
	snapshots, computes := 0, 0
	for i, a := range ab.Allocations {
		allocations[i] = a.AllocationID.String()
		snapshots += len(a.Snapshots)
		computes += len(a.Computes)
	}
	reservations := make([]string, len(ab.Reservations))
	for i, rv := range ab.Reservations {
		reservations[i] = rv.EnvironmentID.String()
	}
	r.log.Warn("node abandoned: its allocations and reservations were released without cleanup and the node removed",
		"node", ab.NodeID.String(), "action", ab.Action, "backend", ab.BackendFingerprint,
		"allocations", allocations, "snapshots", snapshots, "incarnations", computes,
		"reservation_environments", reservations, "abandoned_at", ab.AbandonedAt)
}
