package nodes

import (
	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox/providers"

	"berth.dev/core/store"
)

// Diagnostic codes of a node that does not serve the committed deployment
// generation as committed. Core records the node's presence as not ready
// with the code, so placement never chooses it, while it stays connected
// (what it holds stays observable).
const (
	// DiagnosticNoDeployment: nothing is committed yet, so there is no
	// generation to serve.
	DiagnosticNoDeployment = "no_committed_generation"
	// DiagnosticProviderKindMismatch: the node's adapter is of another
	// provider kind than the committed one.
	DiagnosticProviderKindMismatch = "provider_kind_mismatch"
	// DiagnosticGenerationMismatch: the node does not serve the committed
	// generation (not published to it yet, or published to it and not
	// reported back).
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

// Published is generation g as Core publishes it to a node.
func Published(g store.Generation) nodewire.Generation {
	return nodewire.Generation{
		Number:           g.Generation,
		ProviderKind:     g.ProviderKind,
		Public:           g.PublicConfig,
		Specification:    g.Specification,
		DeploymentDigest: providers.DeploymentDigest(g.ProviderKind, g.Specification),
	}
}

// Check returns the diagnostic code of the first mismatch between b and a
// node of provider kind whose status of b's generation is st (nil when it
// does not serve it): the provider kind, then the generation, then the
// selection; "" when the node serves exactly b.
func (b Binding) Check(kind string, st *pb.GenerationStatus) string {
	switch {
	case kind != b.ProviderKind:
		return DiagnosticProviderKindMismatch
	case st == nil || st.GetGeneration() != b.Generation:
		return DiagnosticGenerationMismatch
	case st.GetDeploymentDigest() != b.DeploymentDigest:
		return DiagnosticSpecificationMismatch
	}
	return ""
}

// CheckBackend returns DiagnosticBackendFingerprintMismatch unless the
// node reports fingerprint, the backend it is bound to (bound, never
// empty once the node has been bound), "" when it does.
func CheckBackend(fingerprint, bound string) string {
	if fingerprint == "" || fingerprint != bound {
		return DiagnosticBackendFingerprintMismatch
	}
	return ""
}
