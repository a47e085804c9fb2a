package goodadmin

import (
	"context"
	"time"

	g "google.golang.org/grpc"
)

// Liveness is a callback New takes; LiveState is what it returns.
type Liveness func(ctx context.Context) (map[string]LiveState, error)

// LiveState is one thing's state.
type LiveState struct{ At time.Time }

// Server is the ThingService.
type Server struct{ live Liveness }

// New returns the service; it checks live.
func New(live Liveness) (*Server, error) { return &Server{live: live}, nil }

// Register registers the service on s.
func (s *Server) Register(srv *g.Server) {}

func (s *Server) ListThings(ctx context.Context) error {
	_, _, err := admin.Paginate(ctx, scopeListThings)
	return err
}
