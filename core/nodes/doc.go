// Package nodes is Core's side of the node protocol: it dials a node agent
// with Core's client certificate, checks the version handshake, opens the
// Connect stream that is the node's connection, and exposes the node as a
// sandbox provider (Proxy), so lifecycle code never knows whether a
// provider is local or remote.
//
// Rules:
//   - The Proxy checks its declaration before it resolves a connection or
//     sends anything; operations the transport does not carry
//     (ObserveBatch, DiscoverSelection, VerifyCredential) are declared
//     unsupported here with reason codes.
//   - Every call carries the protocol version, connection id, owner epoch
//     and generation. Errors come back once through nodewire.FromError; a
//     transport failure or deadline on a mutation is an unknown outcome and
//     nothing is ever resent.
package nodes
