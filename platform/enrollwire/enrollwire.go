package enrollwire

import (
	"errors"

	"google.golang.org/grpc/codes"

	"berth.dev/platform/errgrpc"
	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"
	"berth.dev/sandbox/errdefs"
)

// RejectedMessage is the token refusal's fixed message: what the operator
// does next.
const RejectedMessage = "enrollment token rejected: create a new enrollment token and enroll again"

// Codec returns enrollment's codec with rejected as the class of the token
// refusal. It panics when rejected does not wrap errdefs.ErrFenced: that
// is a programming error of the side that builds it, found at start.
func Codec(rejected error) *errgrpc.Codec {
	if !errors.Is(rejected, errdefs.ErrFenced) {
		panic("enrollwire: the token refusal's class must wrap errdefs.ErrFenced")
	}
	return errgrpc.New(enrollmentv1.ErrorDomain, append([]errgrpc.Row{{
		Class: rejected, Code: codes.PermissionDenied, Reason: enrollmentv1.ReasonTokenRejected,
		Message: RejectedMessage,
	}}, errgrpc.Common()...), errgrpc.Options{
		Unknown:      errgrpc.Row{Code: codes.Internal, Reason: "internal", Message: "enrollment failed"},
		FieldDetails: true,
	})
}
