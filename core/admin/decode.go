package admin

import (
	"berth.dev/platform/errgrpc"
	"berth.dev/sandbox/errdefs"
)

// errMalformed answers a request body that is not a well-formed message of
// the method's request type (truncated wire data, invalid UTF-8 in a
// string, nesting past MaxMessageDepth). Its field is the whole request.
var errMalformed = errdefs.Invalid("request", "not a well-formed protobuf message of the method's request type")

// newDecoder is the admin server's wire codec: a body that does not decode
// is INVALID_ARGUMENT naming "request" with the admin API's ErrorInfo,
// never grpc-go's INTERNAL and parser text (errgrpc.Decoder says how).
func newDecoder() *errgrpc.Decoder {
	return errgrpc.NewDecoder(MaxMessageDepth, func() error { return ToStatus(errMalformed) })
}
