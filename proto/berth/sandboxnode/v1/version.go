package sandboxnodev1

// ProtocolVersion is the exact node protocol version. Core and a node agent
// talk only when both carry the same string; there is no negotiation.
//
// Change log (newest first; bump on every wire-visible change):
//
//	berth.sandboxnode.v1/1: Hello handshake.
const ProtocolVersion = "berth.sandboxnode.v1/1"
