package auditadmin

import (
	"context"

	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/admin"
	"berth.dev/core/audit"
)

// New returns berth.admin.v1.AuditService over trail. pages mints and
// checks the page tokens.
func New(trail *audit.Trail, pages *admin.PageTokens) *Server {
	return &Server{trail: trail, pages: pages}
}

// Register registers the service on s.
func (g *Server) Register(s *grpc.Server) { adminv1.RegisterAuditServiceServer(s, g) }

// Server implements berth.admin.v1.AuditService.
type Server struct {
	adminv1.UnimplementedAuditServiceServer
	trail *audit.Trail
	pages *admin.PageTokens
}

// ListAuditEvents lists the trail, oldest first, filtered.
func (g *Server) ListAuditEvents(ctx context.Context, req *adminv1.ListAuditEventsRequest) (*adminv1.ListAuditEventsResponse, error) {
	f, scope, err := Filter(req)
	if err != nil {
		return nil, err
	}
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), eventKeyset(g.trail, f, scope))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListAuditEventsResponse{AuditEvents: admin.Protos(page, EventProto), NextPageToken: next}, nil
}
