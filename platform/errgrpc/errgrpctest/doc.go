// Package errgrpctest is the client side of a hostile peer for the tests
// of every server that installs an errgrpc.Decoder (the admin API,
// enrollment, the Runtime gateway, the node protocol): bodies sent in wire
// form, unchanged, and the ErrorInfo of the refusal.
//
// Rules:
//   - It is imported only by tests.
//   - Raw bodies go out as given (Codec does not marshal), so a test can
//     send what no generated client would: truncated, oversized or
//     malformed messages.
//   - Assertions read the status's ErrorInfo (Info), the one place a
//     boundary's fixed reason travels, never the message text.
//   - It imports grpc and the standard library only, nothing of Berth.
package errgrpctest
