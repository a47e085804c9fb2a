// Package enrollmentgrpc is the thin gRPC adapter of
// berth.enrollment.v1.EnrollmentService over core/enrollment, served on
// Core's public mutual-TLS listener. It follows the adapter template of
// the admin adapters (core/README.md) on another server.
//
// Rules:
//   - It only converts the request to the logic's arguments and the
//     result to the response (convert.go).
//   - Its error crosses once, through its codec (errgrpc, domain
//     enrollmentv1.ErrorDomain): the token refusal
//     (enrollment_token_rejected) whichever check refused it, then the
//     shared table, anything else internal; always a fixed message, never
//     the cause.
//   - The server it is registered on installs ServerOptions first, so a
//     body that does not decode is refused with enrollment's
//     INVALID_ARGUMENT naming "request", never grpc-go's text. The caller
//     is not authenticated yet.
package enrollmentgrpc
