package nodeadmin

import (
	"context"
	"github.com/google/uuid"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// NewServer returns s as berth.admin.v1.NodeService, for
// admin.Options.Nodes. It only converts: requests to s's arguments, its
// results to responses; it returns errors as they are (the admin server
// converts them once).
func NewServer(s *Service, live Liveness) adminv1.NodeServiceServer {
	return &server{svc: s, live: live}
}

// Liveness reports what Core's node connections know of a node now: its
// presence, latest readiness and capacity. false means Core holds no
// connection loop for the node (it is not enabled, or Core just started).
type Liveness func(id uuid.UUID) (LiveState, bool)

// LiveState is one node's connection state as Core sees it.
type LiveState struct {
	Connected      bool
	LastReport     time.Time
	Generation     uint64
	Ready          bool
	DiagnosticCode string
	CheckTime      time.Time
	CPUMillis      int64
	MemoryBytes    int64
	DiskFreeBytes  int64
}

type server struct {
	adminv1.UnimplementedNodeServiceServer
	svc  *Service
	live Liveness
}

func (g *server) CreateEnrollmentToken(ctx context.Context, req *adminv1.CreateEnrollmentTokenRequest) (*adminv1.CreateEnrollmentTokenResponse, error) {
	ttl, err := requestTTL(req.GetTtl())
	if err != nil {
		return nil, err
	}
	issued, err := g.svc.CreateEnrollmentToken(ctx, req.GetRequestId(), ttl)
	if err != nil {
		return nil, err
	}
	return &adminv1.CreateEnrollmentTokenResponse{
		EnrollmentToken: tokenProto(issued.Token),
		TokenText:       issued.Text.Reveal(),
	}, nil
}

func (g *server) ListEnrollmentTokens(ctx context.Context, req *adminv1.ListEnrollmentTokensRequest) (*adminv1.ListEnrollmentTokensResponse, error) {
	page, next, err := g.svc.ListEnrollmentTokens(ctx, req.GetPageSize(), req.GetPageToken(), req.GetShowInactive())
	if err != nil {
		return nil, err
	}
	resp := &adminv1.ListEnrollmentTokensResponse{NextPageToken: next}
	for _, t := range page {
		resp.EnrollmentTokens = append(resp.EnrollmentTokens, tokenProto(t))
	}
	return resp, nil
}

func (g *server) RevokeEnrollmentToken(ctx context.Context, req *adminv1.RevokeEnrollmentTokenRequest) (*adminv1.RevokeEnrollmentTokenResponse, error) {
	tok, err := g.svc.RevokeEnrollmentToken(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &adminv1.RevokeEnrollmentTokenResponse{EnrollmentToken: tokenProto(tok)}, nil
}

func (g *server) ListNodes(ctx context.Context, req *adminv1.ListNodesRequest) (*adminv1.ListNodesResponse, error) {
	page, next, err := g.svc.ListNodes(ctx, req.GetPageSize(), req.GetPageToken(), req.GetShowRemoved())
	if err != nil {
		return nil, err
	}
	resp := &adminv1.ListNodesResponse{NextPageToken: next}
	for _, n := range page {
		resp.Nodes = append(resp.Nodes, g.nodeProto(n))
	}
	return resp, nil
}

func (g *server) GetNode(ctx context.Context, req *adminv1.GetNodeRequest) (*adminv1.GetNodeResponse, error) {
	n, err := g.svc.GetNode(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &adminv1.GetNodeResponse{Node: g.nodeProto(n)}, nil
}

func (g *server) EnableNode(ctx context.Context, req *adminv1.EnableNodeRequest) (*adminv1.EnableNodeResponse, error) {
	n, err := g.svc.EnableNode(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &adminv1.EnableNodeResponse{Node: g.nodeProto(n)}, nil
}

func (g *server) RetireNode(ctx context.Context, req *adminv1.RetireNodeRequest) (*adminv1.RetireNodeResponse, error) {
	n, err := g.svc.RetireNode(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &adminv1.RetireNodeResponse{Node: g.nodeProto(n)}, nil
}

func (g *server) RemoveNode(ctx context.Context, req *adminv1.RemoveNodeRequest) (*adminv1.RemoveNodeResponse, error) {
	n, err := g.svc.RemoveNode(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &adminv1.RemoveNodeResponse{Node: g.nodeProto(n)}, nil
}

// requestTTL reads CreateEnrollmentTokenRequest.ttl: unset is
// DefaultTokenTTL; a set value goes to the Service as it is, which checks
// its bounds (so an explicit zero is refused, not defaulted).
func requestTTL(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return DefaultTokenTTL, nil
	}
	if d.CheckValid() != nil {
		return 0, errdefs.Invalid("ttl", "not a valid duration")
	}
	return d.AsDuration(), nil
}

// tokenState is the API state of tok as read (expiry by the database
// clock at the read): used, revoked unused, expired unused, or active.
func tokenState(tok store.EnrollmentToken) adminv1.EnrollmentToken_State {
	switch {
	case tok.UsedAt != nil:
		return adminv1.EnrollmentToken_STATE_USED
	case tok.RevokedAt != nil:
		return adminv1.EnrollmentToken_STATE_REVOKED
	case tok.Expired:
		return adminv1.EnrollmentToken_STATE_EXPIRED
	}
	return adminv1.EnrollmentToken_STATE_ACTIVE
}

// tokenProto is the API form of a token record; the record holds no text
// or secret hash, so neither can appear here.
func tokenProto(tok store.EnrollmentToken) *adminv1.EnrollmentToken {
	out := &adminv1.EnrollmentToken{
		Name:       admin.EnrollmentTokenName.Format(tok.ID),
		State:      tokenState(tok),
		CreateTime: timestamp(&tok.CreatedAt),
		ExpireTime: timestamp(&tok.ExpiresAt),
		UseTime:    timestamp(tok.UsedAt),
		RevokeTime: timestamp(tok.RevokedAt),
	}
	if tok.NodeID != nil {
		out.Node = admin.NodeName.Format(tok.NodeID.String())
	}
	return out
}

// nodeStates maps the store's node states to the API's.
var nodeStates = map[store.NodeState]adminv1.Node_State{
	store.NodeEnrolled: adminv1.Node_STATE_ENROLLED,
	store.NodeEnabled:  adminv1.Node_STATE_ENABLED,
	store.NodeRetired:  adminv1.Node_STATE_RETIRED,
	store.NodeRemoved:  adminv1.Node_STATE_REMOVED,
}

// nodeProto is the API form of a node, with presence, readiness and
// capacity from Core's node connections when it has them. Of capacity
// only what the node reports is filled in: the deployment's limits and
// the counts of held sandboxes (max_active, max_retained, active,
// retained) are left unset.
func (g *server) nodeProto(n Node) *adminv1.Node {
	out := &adminv1.Node{
		Name:             admin.NodeName.Format(n.ID.String()),
		Id:               n.ID.String(),
		AdvertiseAddress: n.AdvertiseAddress,
		State:            nodeStates[n.State],
		EnrollTime:       timestamp(&n.CreatedAt),
	}
	if n.EnrollmentTokenID != "" {
		out.EnrollmentToken = admin.EnrollmentTokenName.Format(n.EnrollmentTokenID)
	}
	if g.live == nil {
		return out
	}
	if l, ok := g.live(n.ID); ok {
		out.Presence = &adminv1.Presence{Connected: l.Connected, LastReportTime: timestamp(&l.LastReport)}
		if !l.CheckTime.IsZero() {
			out.Readiness = &adminv1.Readiness{
				Generation: l.Generation, Ready: l.Ready, DiagnosticCode: l.DiagnosticCode,
				CheckTime: timestamp(&l.CheckTime),
			}
			out.Capacity = &adminv1.Capacity{CpuMillis: l.CPUMillis, MemoryBytes: l.MemoryBytes, DiskFreeBytes: l.DiskFreeBytes}
		}
	}
	return out
}

// timestamp converts t, leaving a nil or zero time unset.
func timestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(*t)
}
