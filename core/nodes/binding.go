package nodes

import (
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox/providers"

	"berth.dev/core/store"
)

// Diagnostic codes of a node whose Hello does not match the committed
// deployment generation. Core records the node's presence as not ready
// with the code, so placement never chooses it, while it stays connected
// (what it holds stays observable).
const (
	// DiagnosticProviderKindMismatch: the node's adapter is of another
	// provider kind than the committed one.
	DiagnosticProviderKindMismatch = "provider_kind_mismatch"
	// DiagnosticGenerationMismatch: the node serves another generation
	// than the committed one.
	DiagnosticGenerationMismatch = "generation_mismatch"
	// DiagnosticSpecificationMismatch: the node serves the committed
	// generation's number with another selection (its deployment digest
	// differs from the committed generation's).
	DiagnosticSpecificationMismatch = "specification_mismatch"
	// DiagnosticBackendFingerprintMismatch: the node reports another
	// native backend than the one it was bound to when it first served
	// the committed generation (store.Owner.BindNodeBackend): its
	// allocations resolve to the bound backend and are never repointed.
	DiagnosticBackendFingerprintMismatch = "backend_fingerprint_mismatch"
)

// Binding is what a node must serve to be ready: the committed deployment
// generation's number, provider kind and deployment digest.
type Binding struct {
	Generation       uint64
	ProviderKind     string
	DeploymentDigest string
}

// BindingOf returns the binding of the committed generation g, with the
// digest computed by the function the node agent uses
// (providers.DeploymentDigest).
func BindingOf(g store.Generation) Binding {
	return Binding{
		Generation:       g.Generation,
		ProviderKind:     g.ProviderKind,
		DeploymentDigest: providers.DeploymentDigest(g.ProviderKind, g.Specification),
	}
}

// Check returns the diagnostic code of hello's first mismatch with b (the
// provider kind, then the generation, then the selection), or "" when the
// node serves exactly b.
func (b Binding) Check(hello *pb.HelloResponse) string {
	switch {
	case hello.GetProviderKind() != b.ProviderKind:
		return DiagnosticProviderKindMismatch
	case hello.GetGeneration() != b.Generation:
		return DiagnosticGenerationMismatch
	case hello.GetDeploymentDigest() != b.DeploymentDigest:
		return DiagnosticSpecificationMismatch
	}
	return ""
}

// CheckBackend returns DiagnosticBackendFingerprintMismatch unless hello
// reports the backend the node is bound to (bound, never empty once the
// node has been bound), "" when it does.
func CheckBackend(hello *pb.HelloResponse, bound string) string {
	if fp := hello.GetBackendFingerprint(); fp == "" || fp != bound {
		return DiagnosticBackendFingerprintMismatch
	}
	return ""
}
