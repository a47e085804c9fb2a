package nodeadmin

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/audit"
	"berth.dev/core/enrollment"
	"berth.dev/core/nodes"
	"berth.dev/core/store"
)

// New returns berth.admin.v1.NodeService over tokens (the enrollment
// token calls) and registry (the node calls). pages mints and checks the
// list calls' page tokens (its key must outlive restarts); live adds what
// Core's node connections observe (nil: nothing is observed). It refuses
// a missing tokens, registry or pages.
func New(tokens *enrollment.Tokens, registry *nodes.Registry, pages *admin.PageTokens, live Liveness) (*Server, error) {
	switch {
	case tokens == nil:
		return nil, errors.New("nodeadmin: no enrollment tokens")
	case registry == nil:
		return nil, errors.New("nodeadmin: no node registry")
	case pages == nil:
		return nil, errors.New("nodeadmin: no page tokens")
	}
	return &Server{tokens: tokens, registry: registry, pages: pages, live: live}, nil
}

// Register registers the service on s.
func (g *Server) Register(s *grpc.Server) { adminv1.RegisterNodeServiceServer(s, g) }

// Liveness reports what Core knows of each of the nodes ids now: its
// presence, latest readiness and capacity. A node missing from the map is
// one Core holds no connection loop for (it is not enabled, or Core just
// started): nothing is reported for it.
type Liveness func(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]LiveState, error)

// LiveState is one node's connection state as Core sees it.
type LiveState struct {
	// Connected is the node's presence: the one predicate placement
	// applies too (store.NodePresence.Present).
	Connected      bool
	LastReport     time.Time
	Generation     uint64
	Ready          bool
	DiagnosticCode string
	CheckTime      time.Time
	CPUMillis      int64
	MemoryBytes    int64
	DiskFreeBytes  int64
	// CreationReceiptsHeld is the node's latest count of creation-absence
	// receipts (Docker tombstones) it keeps.
	CreationReceiptsHeld int64
}

// Server implements berth.admin.v1.NodeService.
type Server struct {
	adminv1.UnimplementedNodeServiceServer
	tokens   *enrollment.Tokens
	registry *nodes.Registry
	pages    *admin.PageTokens
	live     Liveness
}

// CreateEnrollmentToken issues a single-use enrollment token; its text is in this response only.
func (g *Server) CreateEnrollmentToken(ctx context.Context, req *adminv1.CreateEnrollmentTokenRequest) (*adminv1.CreateEnrollmentTokenResponse, error) {
	ttl, err := requestTTL(req.GetTtl())
	if err != nil {
		return nil, err
	}
	requestID, err := requestID(req.GetRequestId())
	if err != nil {
		return nil, err
	}
	issued, err := g.tokens.Create(ctx, requestID, ttl)
	if err != nil {
		return nil, err
	}
	return &adminv1.CreateEnrollmentTokenResponse{
		EnrollmentToken: tokenProto(issued.Token),
		TokenText:       issued.Text.Reveal(),
	}, nil
}

// ListEnrollmentTokens lists enrollment tokens, oldest first.
func (g *Server) ListEnrollmentTokens(ctx context.Context, req *adminv1.ListEnrollmentTokensRequest) (*adminv1.ListEnrollmentTokensResponse, error) {
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), tokenKeyset(g.tokens, req.GetShowInactive()))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListEnrollmentTokensResponse{EnrollmentTokens: admin.Protos(page, tokenProto), NextPageToken: next}, nil
}

// RevokeEnrollmentToken makes an unused token unusable.
func (g *Server) RevokeEnrollmentToken(ctx context.Context, req *adminv1.RevokeEnrollmentTokenRequest) (*adminv1.RevokeEnrollmentTokenResponse, error) {
	ids, err := admin.ValidateName("name", req.GetName(), admin.EnrollmentTokenName)
	if err != nil {
		return nil, err
	}
	tok, err := g.tokens.Revoke(ctx, ids[0])
	if err != nil {
		return nil, err
	}
	return &adminv1.RevokeEnrollmentTokenResponse{EnrollmentToken: tokenProto(tok)}, nil
}

// ListNodes lists nodes in enrollment order.
func (g *Server) ListNodes(ctx context.Context, req *adminv1.ListNodesRequest) (*adminv1.ListNodesResponse, error) {
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), nodeKeyset(g.registry, req.GetShowRemoved()))
	if err != nil {
		return nil, err
	}
	out, err := g.nodeProtos(ctx, page...)
	if err != nil {
		return nil, err
	}
	return &adminv1.ListNodesResponse{Nodes: out, NextPageToken: next}, nil
}

// GetNode reads a node with what Core observes of it.
func (g *Server) GetNode(ctx context.Context, req *adminv1.GetNodeRequest) (*adminv1.GetNodeResponse, error) {
	n, err := g.onNode(ctx, req.GetName(), g.registry.Get)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetNodeResponse{Node: n}, nil
}

// EnableNode admits a node to placement.
func (g *Server) EnableNode(ctx context.Context, req *adminv1.EnableNodeRequest) (*adminv1.EnableNodeResponse, error) {
	n, err := g.onNode(ctx, req.GetName(), audited(g.registry.Enable))
	if err != nil {
		return nil, err
	}
	return &adminv1.EnableNodeResponse{Node: n}, nil
}

// RetireNode stops new placement on a node.
func (g *Server) RetireNode(ctx context.Context, req *adminv1.RetireNodeRequest) (*adminv1.RetireNodeResponse, error) {
	n, err := g.onNode(ctx, req.GetName(), audited(g.registry.Retire))
	if err != nil {
		return nil, err
	}
	return &adminv1.RetireNodeResponse{Node: n}, nil
}

// audited is a registry change decided by the caller of ctx (audit.From).
func audited(change func(context.Context, uuid.UUID, store.Provenance) (nodes.Node, error)) func(context.Context, uuid.UUID) (nodes.Node, error) {
	return func(ctx context.Context, id uuid.UUID) (nodes.Node, error) { return change(ctx, id, audit.From(ctx)) }
}

// RemoveNode removes the node (Registry.Remove) or, with abandon, removes
// it by abandoning what it holds (Registry.Abandon). Either way a removed
// node comes back with its recorded abandonment, if it has one.
func (g *Server) RemoveNode(ctx context.Context, req *adminv1.RemoveNodeRequest) (*adminv1.RemoveNodeResponse, error) {
	var ab *store.NodeAbandonment
	remove := audited(g.registry.Remove)
	if a := req.GetAbandon(); a != nil {
		remove = func(ctx context.Context, id uuid.UUID) (nodes.Node, error) {
			n, got, err := g.registry.Abandon(ctx, id, a.GetBackendFingerprint(), audit.From(ctx))
			ab = got
			return n, err
		}
	}
	n, err := g.onNode(ctx, req.GetName(), remove)
	if err != nil {
		return nil, err
	}
	if ab == nil && n.GetState() == adminv1.Node_STATE_REMOVED {
		id, _ := uuid.Parse(n.GetId())
		if ab, err = g.registry.Abandonment(ctx, id); err != nil {
			return nil, err
		}
	}
	return &adminv1.RemoveNodeResponse{Node: n, Abandonment: abandonmentProto(ab)}, nil
}

// onNode parses the node name ("nodes/{node}") and calls the registry
// with its id.
func (g *Server) onNode(ctx context.Context, name string, call func(context.Context, uuid.UUID) (nodes.Node, error)) (*adminv1.Node, error) {
	ids, err := admin.ValidateName("name", name, admin.NodeName)
	if err != nil {
		return nil, err
	}
	id, err := uuid.Parse(ids[0])
	if err != nil { // ValidateName accepted a canonical UUID: unreachable
		return nil, errdefs.Invalid("name", "must match nodes/{node}")
	}
	n, err := call(ctx, id)
	if err != nil {
		return nil, err
	}
	out, err := g.nodeProtos(ctx, n)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// nodeProtos is the API form of each of ns, with what Core knows of them
// now (Liveness, read once for all of them).
func (g *Server) nodeProtos(ctx context.Context, ns ...nodes.Node) ([]*adminv1.Node, error) {
	var live map[uuid.UUID]LiveState
	if g.live != nil {
		ids := make([]uuid.UUID, len(ns))
		for i, n := range ns {
			ids[i] = n.ID
		}
		var err error
		if live, err = g.live(ctx, ids); err != nil {
			return nil, err
		}
	}
	out := make([]*adminv1.Node, len(ns))
	for i, n := range ns {
		l, ok := live[n.ID]
		out[i] = nodeProto(n, l, ok)
	}
	return out, nil
}
