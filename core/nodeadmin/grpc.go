package nodeadmin

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/enrollment"
	"berth.dev/core/nodes"
	"berth.dev/core/store"
)

// NewServer returns berth.admin.v1.NodeService over tokens (the
// enrollment token calls) and registry (the node calls), for
// admin.Options.Nodes. pages mints and checks the list calls' page tokens
// (its key must outlive restarts); live adds what Core's node connections
// observe (nil: nothing is observed). The server only converts: names,
// request ids, lifetimes and page tokens to the logic's arguments, its
// results to responses; it returns errors as they are (the admin server
// converts them once).
func NewServer(tokens *enrollment.Tokens, registry *nodes.Registry, pages *admin.PageTokens, live Liveness) (adminv1.NodeServiceServer, error) {
	switch {
	case tokens == nil:
		return nil, errors.New("nodeadmin: no enrollment tokens")
	case registry == nil:
		return nil, errors.New("nodeadmin: no node registry")
	case pages == nil:
		return nil, errors.New("nodeadmin: no page tokens")
	}
	return &server{tokens: tokens, registry: registry, pages: pages, live: live}, nil
}

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

type server struct {
	adminv1.UnimplementedNodeServiceServer
	tokens   *enrollment.Tokens
	registry *nodes.Registry
	pages    *admin.PageTokens
	live     Liveness
}

func (g *server) CreateEnrollmentToken(ctx context.Context, req *adminv1.CreateEnrollmentTokenRequest) (*adminv1.CreateEnrollmentTokenResponse, error) {
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

func (g *server) ListEnrollmentTokens(ctx context.Context, req *adminv1.ListEnrollmentTokensRequest) (*adminv1.ListEnrollmentTokensResponse, error) {
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), tokenKeyset(g.tokens, req.GetShowInactive()))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListEnrollmentTokensResponse{EnrollmentTokens: admin.Protos(page, tokenProto), NextPageToken: next}, nil
}

func (g *server) RevokeEnrollmentToken(ctx context.Context, req *adminv1.RevokeEnrollmentTokenRequest) (*adminv1.RevokeEnrollmentTokenResponse, error) {
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

func (g *server) ListNodes(ctx context.Context, req *adminv1.ListNodesRequest) (*adminv1.ListNodesResponse, error) {
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

func (g *server) GetNode(ctx context.Context, req *adminv1.GetNodeRequest) (*adminv1.GetNodeResponse, error) {
	n, err := g.onNode(ctx, req.GetName(), g.registry.Get)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetNodeResponse{Node: n}, nil
}

func (g *server) EnableNode(ctx context.Context, req *adminv1.EnableNodeRequest) (*adminv1.EnableNodeResponse, error) {
	n, err := g.onNode(ctx, req.GetName(), g.registry.Enable)
	if err != nil {
		return nil, err
	}
	return &adminv1.EnableNodeResponse{Node: n}, nil
}

func (g *server) RetireNode(ctx context.Context, req *adminv1.RetireNodeRequest) (*adminv1.RetireNodeResponse, error) {
	n, err := g.onNode(ctx, req.GetName(), g.registry.Retire)
	if err != nil {
		return nil, err
	}
	return &adminv1.RetireNodeResponse{Node: n}, nil
}

// RemoveNode removes the node (Registry.Remove) or, with abandon, removes
// it by abandoning what it holds (Registry.Abandon). Either way a removed
// node comes back with its recorded abandonment, if it has one.
func (g *server) RemoveNode(ctx context.Context, req *adminv1.RemoveNodeRequest) (*adminv1.RemoveNodeResponse, error) {
	var ab *store.NodeAbandonment
	remove := g.registry.Remove
	if a := req.GetAbandon(); a != nil {
		remove = func(ctx context.Context, id uuid.UUID) (nodes.Node, error) {
			n, got, err := g.registry.Abandon(ctx, id, a.GetBackendFingerprint())
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

// abandonmentProto is the API form of a recorded abandonment (nil: none):
// Berth names and counts only, never the native identities the record
// keeps.
func abandonmentProto(ab *store.NodeAbandonment) *adminv1.NodeAbandonment {
	if ab == nil {
		return nil
	}
	out := &adminv1.NodeAbandonment{
		BackendFingerprint: ab.BackendFingerprint,
		AbandonTime:        admin.Timestamp(&ab.AbandonedAt),
	}
	for _, a := range ab.Allocations {
		out.Allocations = append(out.Allocations, &adminv1.AbandonedAllocation{
			Allocation:   admin.AllocationName.Format(a.AllocationID.String()),
			Session:      admin.SessionName.Format(a.SessionID.String()),
			Snapshots:    clamp32(int64(len(a.Snapshots))),
			Incarnations: clamp32(int64(len(a.Computes))),
		})
	}
	for _, r := range ab.Reservations {
		out.Reservations = append(out.Reservations, admin.SessionName.Format(r.SessionID.String()))
	}
	return out
}

// onNode parses the node name ("nodes/{node}") and calls the registry
// with its id.
func (g *server) onNode(ctx context.Context, name string, call func(context.Context, uuid.UUID) (nodes.Node, error)) (*adminv1.Node, error) {
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

// requestID reads CreateEnrollmentTokenRequest.request_id: a required
// canonical UUID (admin.ValidateRequestID).
func requestID(s string) (uuid.UUID, error) {
	if err := admin.ValidateRequestID("request_id", s); err != nil {
		return uuid.Nil, err
	}
	id, err := uuid.Parse(s)
	if err != nil { // ValidateRequestID accepted it: unreachable
		return uuid.Nil, errdefs.Invalid("request_id", "must be a canonical UUID")
	}
	return id, nil
}

// requestTTL reads CreateEnrollmentTokenRequest.ttl: unset is
// enrollment.DefaultTokenTTL; a set value goes to the logic as it is,
// which checks its bounds (so an explicit zero is refused, not
// defaulted).
func requestTTL(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return enrollment.DefaultTokenTTL, nil
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
		CreateTime: admin.Timestamp(&tok.CreatedAt),
		ExpireTime: admin.Timestamp(&tok.ExpiresAt),
		UseTime:    admin.Timestamp(tok.UsedAt),
		RevokeTime: admin.Timestamp(tok.RevokedAt),
	}
	if tok.NodeID != nil {
		out.Node = admin.NodeName.Format(tok.NodeID.String())
	}
	return out
}

// nodeProtos is the API form of each of ns, with what Core knows of them
// now (Liveness, read once for all of them).
func (g *server) nodeProtos(ctx context.Context, ns ...nodes.Node) ([]*adminv1.Node, error) {
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

// nodeProto is the API form of a node, with presence, readiness and the
// reported capacity (l, when known) from Core's node connections, and
// always what it holds (active, retained) and, once a deployment is
// committed, its limits (max_active, max_retained) and, with a report,
// why it has no room for one more sandbox (nodes.NoRoom).
func nodeProto(n nodes.Node, l LiveState, known bool) *adminv1.Node {
	out := &adminv1.Node{
		Name:             admin.NodeName.Format(n.ID.String()),
		Id:               n.ID.String(),
		AdvertiseAddress: n.AdvertiseAddress,
		State:            adminv1.Node_State(admin.StateValue(adminv1.Node_State_value, string(n.State))),
		EnrollTime:       admin.Timestamp(&n.CreatedAt),
	}
	if n.EnrollmentTokenID != "" {
		out.EnrollmentToken = admin.EnrollmentTokenName.Format(n.EnrollmentTokenID)
	}
	out.BackendFingerprint = n.BackendFingerprint
	if known {
		out.Presence = &adminv1.Presence{Connected: l.Connected, LastReportTime: admin.Timestamp(&l.LastReport)}
		if !l.CheckTime.IsZero() {
			out.Readiness = &adminv1.Readiness{
				Generation: l.Generation, Ready: l.Ready, DiagnosticCode: l.DiagnosticCode,
				CheckTime: admin.Timestamp(&l.CheckTime),
			}
			out.Capacity = &adminv1.Capacity{
				CpuMillis: l.CPUMillis, MemoryBytes: l.MemoryBytes, DiskFreeBytes: l.DiskFreeBytes,
				CreationReceiptsHeld: clamp32(l.CreationReceiptsHeld),
			}
		}
	}
	// What the node holds is the database's, known without a connection;
	// the limits are the committed generation's.
	if out.Capacity == nil {
		out.Capacity = &adminv1.Capacity{}
	}
	c := out.Capacity
	c.Active, c.Retained = clamp32(n.Load.Active), clamp32(n.Load.Retained)
	if n.Limits != nil {
		c.MaxActive, c.MaxRetained = n.Limits.MaxActive, n.Limits.MaxRetained
		if out.Readiness != nil {
			c.NoRoomReason = nodes.NoRoom(*n.Limits, n.Load, c.GetCpuMillis(), c.GetMemoryBytes(), c.GetDiskFreeBytes())
		}
	}
	return out
}

// clamp32 fits a count into the API's int32.
func clamp32(v int64) int32 { return int32(min(v, math.MaxInt32)) }
