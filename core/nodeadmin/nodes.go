package nodeadmin

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// Node is a node as the admin API shows it: the stored record and the
// enrollment token it enrolled with.
//
// It carries no presence, readiness or capacity: those are what Core's
// live node connections observe (core/nodes), and the gRPC layer adds them
// from its Liveness; for a node Core holds no connection loop for, the API
// leaves them unset rather than report anything not observed.
type Node struct {
	store.Node
	// EnrollmentTokenID is the id of the token that enrolled the node,
	// empty when no token records it.
	EnrollmentTokenID string
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

// ListNodes returns one page of nodes in enrollment order and the page
// token of the next page ("" on the last). pageSize and pageToken are the
// request's (admin.PageSize's rules); removed nodes are listed only with
// showRemoved.
func (s *Service) ListNodes(ctx context.Context, pageSize int32, pageToken string, showRemoved bool) ([]Node, string, error) {
	page, next, err := admin.Paginate(ctx, s.pages, pageSize, pageToken, admin.Keyset[store.Node, store.NodeCursor]{
		Scope: []string{scopeListNodes, flagScope("show_removed", showRemoved)},
		Fetch: func(ctx context.Context, after store.NodeCursor, limit int) ([]store.Node, error) {
			page, err := s.store.ListNodesByAge(ctx, limit, after, showRemoved)
			if err != nil {
				return nil, fmt.Errorf("list nodes: %w", err)
			}
			return page, nil
		},
		Cursor: func(n store.Node) ([]byte, error) { return encodeCursor(n.CreatedAt, n.ID[:]), nil },
		Position: func(cursor []byte) (store.NodeCursor, bool) {
			createdAt, id, ok := decodeCursor(cursor)
			if !ok {
				return store.NodeCursor{}, false
			}
			return store.NodeCursor{CreatedAt: createdAt, ID: uuid.UUID(id)}, true
		},
	})
	if err != nil {
		return nil, "", err
	}
	nodes, err := s.withTokens(ctx, page...)
	if err != nil {
		return nil, "", fmt.Errorf("list nodes: %w", err)
	}
	return nodes, next, nil
}

// GetNode returns the node name ("nodes/{node}").
func (s *Service) GetNode(ctx context.Context, name string) (Node, error) {
	id, err := nodeID(name)
	if err != nil {
		return Node{}, err
	}
	n, err := s.store.GetNode(ctx, id)
	if err != nil {
		return Node{}, fmt.Errorf("get node: %w", err)
	}
	nodes, err := s.withTokens(ctx, n)
	if err != nil {
		return Node{}, fmt.Errorf("get node: %w", err)
	}
	return nodes[0], nil
}

// EnableNode admits node name to placement: an enrolled or retired node
// becomes enabled, an enabled one comes back unchanged, a removed one is
// refused (node_removed).
func (s *Service) EnableNode(ctx context.Context, name string) (Node, error) {
	return s.transition(ctx, "enable node", name, func(cur store.NodeState) (store.NodeState, error) {
		switch cur {
		case store.NodeEnrolled, store.NodeRetired, store.NodeEnabled:
			return store.NodeEnabled, nil
		}
		return "", errNodeRemoved
	})
}

// RetireNode stops new placement on node name: an enrolled or enabled
// node becomes retired (what it holds stays owned and observed), a retired
// one comes back unchanged, a removed one is refused (node_removed).
func (s *Service) RetireNode(ctx context.Context, name string) (Node, error) {
	return s.transition(ctx, "retire node", name, func(cur store.NodeState) (store.NodeState, error) {
		switch cur {
		case store.NodeEnrolled, store.NodeEnabled, store.NodeRetired:
			return store.NodeRetired, nil
		}
		return "", errNodeRemoved
	})
}

// RemoveNode removes node name for good: an enrolled or retired node that
// holds nothing becomes removed, a removed one comes back unchanged. An
// enabled node is refused (node_enabled: retire it first), and so is one
// that still holds an unreleased allocation or placement, whatever its
// state of creation or cleanup (node_holds_allocations, store.NodeHolds):
// offline ownership is kept. Core stores no snapshots yet, so there are
// none to hold. The check runs before the state's compare-and-swap, not in
// its transaction: placement only chooses enabled nodes, so what an
// enrolled or retired node holds can only shrink. The removed node keeps
// its identity, so its certificate stays refused.
func (s *Service) RemoveNode(ctx context.Context, name string) (Node, error) {
	id, err := nodeID(name)
	if err != nil {
		return Node{}, err
	}
	return s.transition(ctx, "remove node", name, func(cur store.NodeState) (store.NodeState, error) {
		switch cur {
		case store.NodeRemoved:
			return store.NodeRemoved, nil
		case store.NodeEnrolled, store.NodeRetired:
			// Placement only chooses enabled nodes, so what a retired or
			// merely enrolled node holds can only shrink: checking before
			// the compare-and-swap cannot miss a new reservation.
			holds, err := s.store.NodeHolds(ctx, id)
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

// transition reads node name, asks decide for the state to move it to and
// moves it by compare-and-swap. A node already in that state comes back
// unchanged. When another change won the race (errdefs.ErrFenced), the
// node is read and decided again, up to casAttempts times.
func (s *Service) transition(ctx context.Context, op, name string, decide func(store.NodeState) (store.NodeState, error)) (Node, error) {
	id, err := nodeID(name)
	if err != nil {
		return Node{}, err
	}
	for attempt := 1; ; attempt++ {
		n, err := s.store.GetNode(ctx, id)
		if err != nil {
			return Node{}, fmt.Errorf("%s: %w", op, err)
		}
		to, err := decide(n.State)
		if err != nil {
			return Node{}, fmt.Errorf("%s: %w", op, err)
		}
		if to != n.State {
			n, err = s.store.SetNodeState(ctx, id, n.State, to)
			if errdefs.IsFenced(err) && attempt < casAttempts {
				continue
			}
			if err != nil {
				return Node{}, fmt.Errorf("%s: %w", op, err)
			}
		}
		nodes, err := s.withTokens(ctx, n)
		if err != nil {
			return Node{}, fmt.Errorf("%s: %w", op, err)
		}
		return nodes[0], nil
	}
}

// withTokens adds the enrolling token's id to each node.
func (s *Service) withTokens(ctx context.Context, nodes ...store.Node) ([]Node, error) {
	ids := make([]uuid.UUID, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	tokens, err := s.store.EnrollmentTokensOfNodes(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Node, len(nodes))
	for i, n := range nodes {
		out[i] = Node{Node: n, EnrollmentTokenID: tokens[n.ID]}
	}
	return out, nil
}

// nodeID parses a node name ("nodes/{node}").
func nodeID(name string) (uuid.UUID, error) {
	ids, err := admin.ValidateName("name", name, admin.NodeName)
	if err != nil {
		return uuid.Nil, err
	}
	id, err := uuid.Parse(ids[0])
	if err != nil { // ValidateName accepted a canonical UUID: unreachable
		return uuid.Nil, errdefs.Invalid("name", "must match nodes/{node}")
	}
	return id, nil
}
