// Package nodetls holds the transport-security pieces that Core and the node
// agent share for the node protocol: the installation CA, node and Core
// identities, certificate issuance, TLS configurations and enrollment tokens.
// It is a library: the enrollment RPC and the token store live elsewhere.
//
// Model (DESIGN.md, "Protocols", transport security):
//   - Core holds one installation CA (ECDSA P-256, self-signed, path length
//     0, so it signs leaves only). Its private key is persisted by Core's
//     store, encrypted at rest; MarshalCA output must never be written in the
//     clear.
//   - Identities are URI SANs: a node is urn:berth:node:<node-uuid>, Core is
//     urn:berth:core:<installation-uuid>, and the CA itself carries
//     urn:berth:installation:<installation-uuid>. A leaf carries exactly one
//     URI SAN. UUIDs are canonical: lowercase 8-4-4-4-12 hex, never the nil
//     UUID.
//   - Extended key usage follows the direction of the connections. Core dials
//     nodes, so a node certificate is ServerAuth only and Core's client
//     certificate is ClientAuth only. A node certificate therefore cannot
//     authenticate as a client (to another node), and Core's client
//     certificate cannot serve as a node. Core's enrollment endpoint, which
//     nodes dial exactly once, uses a separate ServerAuth certificate that
//     carries Core's identity (IssueCoreServer).
//   - Every configuration is TLS 1.3 only and verifies peers itself in
//     VerifyConnection: the peer's leaf must be signed directly by the
//     installation CA (no intermediates are used, no system roots, no host
//     names), be valid now, carry the right extended key usage and carry
//     exactly the expected identity.
//   - A node's first contact with Core (enrollment) has no installation CA
//     yet. The enrollment token pins the CA's SHA-256 fingerprint;
//     PinnedConfig accepts only a server whose presented chain contains that
//     CA and whose leaf the CA signed for Core.
//   - Enrollment tokens are "berth-enroll-v1.<id>.<secret>.<ca-fingerprint>".
//     Core stores the id, the SHA-256 of the secret and the expiry; it never
//     stores the token. Expiry and single use are enforced by Core's store.
//
// Secrets (private keys, token secrets) never appear in errors, and the
// package's types that hold them (CA, Token) redact themselves when
// formatted.
package nodetls
