// Package nodewire is the one place where the node protocol
// (berth.sandboxnode.v1) and the sandbox contract meet. The node agent
// (server) and Core's node proxy (client) both import it, so each boundary
// converts exactly once and in the same way.
//
// This is the only package of the sandbox module that imports berth.dev/proto;
// DESIGN.md allows that import for the node wire mapping alone.
//
// # Values
//
// Every message that carries contract values has a pair of functions,
// XToWire and XFromWire.
//
//   - FromWire validates: a nil message, an unspecified enum where a value is
//     required, an unknown enum value, an int that does not fit, an invalid
//     Reference, Command or Resources, or a declaration that fails
//     sandbox.ValidateOperations is an errdefs.FieldError (class ErrInvalid)
//     naming the proto field path, for example "compute.reference.tenant_id".
//     No error ever echoes a submitted value.
//   - ToWire of a request value that needs narrowing (Bootstrap, Command,
//     CreateRequest) validates it and fails with class ErrInvalid, so nothing
//     invalid leaves the caller. The other request values (Reference,
//     Resources, Compute, SnapshotIdentity, the Suspend, Capture, Resume and
//     NewCompute requests) convert totally; the receiver validates them.
//   - ToWire of a result (Info, CommandResult, Observation, ComputeInfo,
//     SuspendResult, CaptureResult, ResumeResult, the declaration) fails with class
//     errdefs.ErrContract when the provider's value breaks the contract or
//     cannot be represented. Whatever a result ToWire accepts, the matching
//     FromWire accepts and returns unchanged.
//
// A client that fails to convert a response must not report the FieldError
// to its caller: the call may have taken effect. MalformedResponse turns such
// a failure into the operation's unknown outcome.
//
// Conversions share byte slices and string slices with their input.
//
// # Errors
//
// Errors cross the wire only as fixed codes (the Code constants): a gRPC
// status with a fixed message per code and one errdetails.ErrorInfo whose
// domain is sandboxnodev1.ErrorDomain and whose reason is the code. The only
// metadata are authored names: "field" for an invalid field, "operation" and
// "reason" for an unsupported operation. A failed Create may add a
// sandboxnodev1.CreateFailure detail with settlement evidence. Native error
// text never crosses.
//
// The server converts with ToStatusFor (or ToStatus, CreateStatus); the
// client converts back with FromError and CreateFailureInfo. An error of no
// known class is an unknown outcome on both sides, never permission to retry
// a mutation.
package nodewire
