package nodes_test

import (
	"testing"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/providers"

	"berth.dev/core/nodes"
	"berth.dev/core/store"
)

// TestBindingCheck: a node's status of the committed generation is
// checked against it; each mismatch gives its own diagnostic code, and the first
// one in a fixed order (kind, generation, selection) when several differ.
func TestBindingCheck(t *testing.T) {
	spec := sandbox.Specification{
		Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 10 << 30},
		MaxActive: 4, MaxRetained: 8,
	}
	committed := store.Generation{Generation: 3, NewGeneration: store.NewGeneration{ProviderKind: "docker", Specification: spec}}
	b := nodes.BindingOf(committed)
	other := spec
	other.Resources.MemoryBytes = 2 << 30
	status := func(gen uint64, kind string, s sandbox.Specification) *pb.GenerationStatus {
		return &pb.GenerationStatus{Generation: gen, DeploymentDigest: providers.DeploymentDigest(kind, s)}
	}
	cases := []struct {
		name string
		kind string
		st   *pb.GenerationStatus
		want string
	}{
		{"serves the committed generation", "docker", status(3, "docker", spec), ""},
		{"another provider kind", "microsandbox", status(3, "microsandbox", spec), nodes.DiagnosticProviderKindMismatch},
		{"does not serve it", "docker", nil, nodes.DiagnosticGenerationMismatch},
		{"the status of another generation", "docker", status(2, "docker", spec), nodes.DiagnosticGenerationMismatch},
		{"another memory limit", "docker", status(3, "docker", other), nodes.DiagnosticSpecificationMismatch},
		{"another max active", "docker", status(3, "docker", func() sandbox.Specification { s := spec; s.MaxActive = 5; return s }()), nodes.DiagnosticSpecificationMismatch},
		{"no deployment digest (not built)", "docker", &pb.GenerationStatus{Generation: 3}, nodes.DiagnosticSpecificationMismatch},
		{"kind before generation", "microsandbox", nil, nodes.DiagnosticProviderKindMismatch},
		{"generation before selection", "docker", status(2, "docker", other), nodes.DiagnosticGenerationMismatch},
		{"no hello", "", nil, nodes.DiagnosticProviderKindMismatch},
	}
	for _, tc := range cases {
		if got := b.Check(tc.kind, tc.st); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckBackend: a node serving the committed generation must report
// the backend it is bound to.
func TestCheckBackend(t *testing.T) {
	cases := []struct {
		name, fingerprint, bound, want string
	}{
		{"the bound backend", "docker:a", "docker:a", ""},
		{"another backend", "docker:b", "docker:a", nodes.DiagnosticBackendFingerprintMismatch},
		{"no fingerprint", "", "docker:a", nodes.DiagnosticBackendFingerprintMismatch},
		{"not bound (never matches)", "docker:a", "", nodes.DiagnosticBackendFingerprintMismatch},
	}
	for _, tc := range cases {
		if got := nodes.CheckBackend(tc.fingerprint, tc.bound); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
