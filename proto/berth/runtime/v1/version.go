package runtimev1

// ProtocolVersion is the exact Core-Runtime protocol version. A Runtime's
// hello must carry the same string; there is no negotiation.
//
// Change log (newest first; bump on every wire-visible change but an
// additive one a peer without it safely ignores, proto/doc.go):
//
//	berth.runtime.v1/1 (addition): Prepared.capabilities, open_transfer
//	  and the Transfer RPC for file operations. A Runtime without them
//	  lists no "files.v1" capability and Core never opens a transfer there.
//	berth.runtime.v1/1 (addition): quiesce, quiesce_ack, quiesce_rejected
//	  for planned suspension. A Runtime without them ignores quiesce and
//	  never answers; Core aborts the suspension after its quiesce timeout.
//	berth.runtime.v1/1: Connect stream, Turns, keepalives.
const ProtocolVersion = "berth.runtime.v1/1"

// ErrorDomain is the ErrorInfo domain of the gateway's fixed error codes.
const ErrorDomain = "runtime.berth.dev"

// The gateway's fixed error codes (ErrorInfo reasons).
const (
	// ReasonCredentialRejected: the device or credential is unknown. The
	// Runtime stops for good.
	ReasonCredentialRejected = "runtime_credential_rejected"
	// ReasonRevoked: the Session was deleted or its allocation is being
	// cleaned up. The Runtime stops for good.
	ReasonRevoked = "runtime_revoked"
	// ReasonProtocolMismatch: the hello's protocol version is not this
	// one. The Runtime stops for good.
	ReasonProtocolMismatch = "protocol_mismatch"
	// ReasonNotAdmitted: the connection cannot be admitted yet (creation
	// not settled, Core not the active owner). The Runtime retries with
	// backoff.
	ReasonNotAdmitted = "runtime_not_admitted"
	// ReasonInvalidMessage: a message broke the protocol (hello missing or
	// repeated, unknown turn, output out of order). The Runtime retries
	// with backoff.
	ReasonInvalidMessage = "invalid_message"
)

// The fixed reasons of a QuiesceRejected (not ErrorInfo reasons: the
// connection goes on).
const (
	// ReasonTurnRunning: a Turn is running on this Runtime. Core may
	// quiesce again after the Turn's result.
	ReasonTurnRunning = "turn_running"
	// ReasonParkFailed: the Runtime could not write its park marker
	// durably; a filesystem captured now would not start parked.
	ReasonParkFailed = "park_failed"
	// ReasonFileWorkPending: a file transfer was still running when the
	// Runtime's drain bound passed. Core may quiesce again later.
	ReasonFileWorkPending = "file_work_pending"
)

// ReasonTransferNotClaimed ends a Transfer stream whose operation is not
// claimed by the device's current connection (UNAVAILABLE): the operation
// ended or moved on, and the Runtime drops it.
const ReasonTransferNotClaimed = "transfer_not_claimed"

// CapabilityFiles is the Prepared capability of a Runtime that serves
// open_transfer and the Transfer RPC.
const CapabilityFiles = "files.v1"

// MaxTransferChunk bounds the data of one Transfer message.
const MaxTransferChunk = 1 << 20

// Bounds of a Quiesce's suspension_token: the Runtime accepts
// MinSuspensionTokenBytes to MaxSuspensionTokenBytes bytes of printable
// ASCII (0x20 to 0x7e); anything else is out of protocol.
const (
	MinSuspensionTokenBytes = 1
	MaxSuspensionTokenBytes = 128
)
