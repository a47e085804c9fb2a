package installationadmin

import (
	"context"

	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/admin"
	"berth.dev/core/installation"
)

// Reader is the logic the adapter serves.
type Reader interface {
	Get(ctx context.Context) (installation.Installation, error)
}

// Server implements berth.admin.v1.InstallationService.
type Server struct {
	adminv1.UnimplementedInstallationServiceServer
	read Reader
}

// New returns the InstallationService over r.
func New(r Reader) *Server { return &Server{read: r} }

// Register registers the service on g.
func (s *Server) Register(g *grpc.Server) { adminv1.RegisterInstallationServiceServer(g, s) }

// GetInstallation reads the installation.
func (s *Server) GetInstallation(ctx context.Context, req *adminv1.GetInstallationRequest) (*adminv1.GetInstallationResponse, error) {
	if _, err := admin.ValidateName("name", req.GetName(), admin.InstallationName); err != nil {
		return nil, err
	}
	inst, err := s.read.Get(ctx)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetInstallationResponse{Installation: installationProto(inst)}, nil
}
