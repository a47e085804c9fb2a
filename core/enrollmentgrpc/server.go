package enrollmentgrpc

import (
	"context"

	"google.golang.org/grpc"

	"berth.dev/platform/enrollwire"
	"berth.dev/platform/errgrpc"
	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/enrollment"
)

// Server implements berth.enrollment.v1.EnrollmentService over
// enrollment.Service.
type Server struct {
	enrollmentv1.UnimplementedEnrollmentServiceServer
	svc *enrollment.Service
}

// New returns the EnrollmentService over svc.
func New(svc *enrollment.Service) *Server { return &Server{svc: svc} }

// Register registers the service on g, which must have been built with
// ServerOptions.
func (s *Server) Register(g *grpc.Server) { enrollmentv1.RegisterEnrollmentServiceServer(g, s) }

// codec is enrollment's one codec (platform/enrollwire, the table the
// node agent decodes with), its token refusal being enrollment.ErrRejected.
var codec = enrollwire.Codec(enrollment.ErrRejected)

// errMalformed answers a request body that is not a well-formed
// EnrollRequest.
var errMalformed = errdefs.Invalid("request", "not a well-formed protobuf message of the method's request type")

// ServerOptions are the options of the server enrollment is served on,
// before any other interceptor option: its codec refuses a malformed body
// with enrollment's INVALID_ARGUMENT (errgrpc.Decoder) instead of grpc-go's
// INTERNAL and parser text.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return errgrpc.NewDecoder(0, func() error { return codec.ToStatus(errMalformed) }).ServerOptions()
}

// Enroll answers one enrollment. Its error crosses once, through codec,
// with a fixed message.
func (s *Server) Enroll(ctx context.Context, req *enrollmentv1.EnrollRequest) (*enrollmentv1.EnrollResponse, error) {
	res, err := s.svc.Enroll(ctx, req.GetToken(), req.GetCsrDer(), req.GetAdvertiseAddress())
	if err != nil {
		return nil, codec.ToStatus(err)
	}
	return enrollResponse(res), nil
}
