package sandboxnodev1

// ProtocolVersion is the exact node protocol version. Core and a node agent
// talk only when both carry the same string; there is no negotiation.
//
// Change log (newest first; bump on every wire-visible change, except an
// addition under the rule of proto/doc.go, recorded here without a bump):
//
//	berth.sandboxnode.v1/5, addition: the ExportSnapshot (server stream)
//	  and ImportSnapshot (client stream) RPCs, a fork's seed relayed by
//	  Core from the source's node to another, fenced like every call on
//	  the stream's open; under Capture's rule below, an agent without them
//	  answers UNIMPLEMENTED, which the proxy turns into unsupported, reason
//	  node_protocol_no_seed_transfer.
//	berth.sandboxnode.v1/5, addition: the CreateSeeded RPC
//	  (CreateSeededRequest, CreateSeededResponse: Create for a fork's
//	  child, from a snapshot of another allocation on the node), fenced
//	  like Create, under the same rule as Capture below: an agent without
//	  it answers UNIMPLEMENTED, which the proxy turns into CreateSeeded
//	  unsupported, reason node_protocol_no_seed.
//	berth.sandboxnode.v1/5, addition: the Capture RPC (CaptureRequest,
//	  CaptureResponse: Suspend that keeps its source), fenced like Suspend.
//	  The version stays: a node agent of v1/5 without it answers gRPC's own
//	  UNIMPLEMENTED at once (an unknown method runs nothing), and Core's
//	  proxy turns exactly that answer to Capture into Capture unsupported,
//	  reason node_protocol_no_capture, so such an agent is refused cleanly
//	  while every other call keeps working; a bump would instead stop
//	  every running v1/5 agent for good. Core of v1/5 without it never
//	  calls Capture.
//	berth.sandboxnode.v1/5: ObserveBatch, GetInfo for up to 64 References
//	  in one call with per-target errors (Core observes a node's running
//	  allocations a page per call instead of one call each).
//	berth.sandboxnode.v1/4: CreateRequest and ResumeRequest carry
//	  core_ca_pem, the CA a Runtime trusts for Core's https URL, which the
//	  adapter places beside the bootstrap file (an agent that ignored it
//	  would start Runtimes that never reach a TLS gateway).
//	berth.sandboxnode.v1/3: Core publishes deployment generations
//	  (ServeGenerations); a node serves several, each call routed to the
//	  adapter of the generation in its metadata; Hello and health reports
//	  carry per-generation status and readiness; Connect carries no
//	  generation (its berth-generation metadata is 0).
//	berth.sandboxnode.v1/2: every provider operation, Connect health stream,
//	  metadata fencing (version, connection id, owner epoch, generation).
//	berth.sandboxnode.v1/1: Hello handshake.
const ProtocolVersion = "berth.sandboxnode.v1/5"

// The gRPC metadata keys every call except Hello carries.
const (
	MetadataProtocolVersion = "berth-protocol-version"
	MetadataConnectionID    = "berth-connection-id"
	MetadataOwnerEpoch      = "berth-owner-epoch"
	MetadataGeneration      = "berth-generation"
)

// ErrorDomain is the ErrorInfo domain of the protocol's fixed error codes.
const ErrorDomain = "sandboxnode.berth.dev"
