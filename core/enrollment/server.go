package enrollment

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"
	"berth.dev/sandbox/errdefs"
)

// Server is the gRPC EnrollmentService over Service.
type Server struct {
	enrollmentv1.UnimplementedEnrollmentServiceServer
	svc *Service
}

// NewServer returns the gRPC service.
func NewServer(svc *Service) *Server { return &Server{svc: svc} }

// Enroll answers one enrollment. Errors carry fixed texts.
func (s *Server) Enroll(ctx context.Context, req *enrollmentv1.EnrollRequest) (*enrollmentv1.EnrollResponse, error) {
	res, err := s.svc.Enroll(ctx, req.GetToken(), req.GetCsrDer(), req.GetAdvertiseAddress())
	switch {
	case err == nil:
		return &enrollmentv1.EnrollResponse{
			NodeId:           res.NodeID.String(),
			InstallationId:   res.InstallationID,
			CertificateDer:   res.CertificateDER,
			CaCertificateDer: res.CADER,
		}, nil
	case errors.Is(err, ErrRejected):
		return nil, status.Error(codes.PermissionDenied, "enrollment token rejected")
	case errdefs.IsInvalid(err):
		field, _ := errdefs.Field(err)
		return nil, status.Error(codes.InvalidArgument, "invalid enrollment request: "+field)
	case errdefs.IsObservationUnavailable(err):
		return nil, status.Error(codes.Unavailable, "store unavailable")
	}
	return nil, status.Error(codes.Internal, "enrollment failed")
}
