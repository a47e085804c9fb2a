// Package enrollmentgrpc is the thin gRPC adapter of
// berth.enrollment.v1.EnrollmentService over core/enrollment, served on
// Core's public mutual-TLS listener. It only converts the request and the
// result; its error crosses once, through codec, with a fixed reason and
// message and never the cause.
package enrollmentgrpc

import (
	"context"

	"google.golang.org/grpc/codes"

	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"
	"berth.dev/sandbox/errgrpc"

	"berth.dev/core/enrollment"
)

// Server is the gRPC EnrollmentService over enrollment.Service.
type Server struct {
	enrollmentv1.UnimplementedEnrollmentServiceServer
	svc *enrollment.Service
}

// NewServer returns the gRPC service.
func NewServer(svc *enrollment.Service) *Server { return &Server{svc: svc} }

// codec is enrollment's one codec: the token refusal first (it wraps
// ErrFenced), then the shared table; anything else is internal.
var codec = errgrpc.New(enrollmentv1.ErrorDomain, append([]errgrpc.Row{{
	Class: enrollment.ErrRejected, Code: codes.PermissionDenied, Reason: enrollmentv1.ReasonTokenRejected,
	Message: "enrollment token rejected: create a new enrollment token and enroll again",
}}, errgrpc.Common()...), errgrpc.Options{
	Unknown:      errgrpc.Row{Code: codes.Internal, Reason: "internal", Message: "enrollment failed"},
	FieldDetails: true,
})

// Enroll answers one enrollment. Its error crosses once, through codec,
// with a fixed message.
func (s *Server) Enroll(ctx context.Context, req *enrollmentv1.EnrollRequest) (*enrollmentv1.EnrollResponse, error) {
	res, err := s.svc.Enroll(ctx, req.GetToken(), req.GetCsrDer(), req.GetAdvertiseAddress())
	if err != nil {
		return nil, codec.ToStatus(err)
	}
	return &enrollmentv1.EnrollResponse{
		NodeId:           res.NodeID.String(),
		InstallationId:   res.InstallationID,
		CertificateDer:   res.CertificateDER,
		CaCertificateDer: res.CADER,
	}, nil
}
