package nodes_test

import (
	"testing"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/providers"

	"berth.dev/core/nodes"
	"berth.dev/core/store"
)

// TestBindingCheck: a node's Hello is checked against the committed
// generation; each mismatch gives its own diagnostic code, and the first
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
	hello := func(kind string, gen uint64, s sandbox.Specification) *pb.HelloResponse {
		return &pb.HelloResponse{ProviderKind: kind, Generation: gen, DeploymentDigest: providers.DeploymentDigest(kind, s)}
	}
	cases := []struct {
		name  string
		hello *pb.HelloResponse
		want  string
	}{
		{"serves the committed generation", hello("docker", 3, spec), ""},
		{"another provider kind", hello("microsandbox", 3, spec), nodes.DiagnosticProviderKindMismatch},
		{"an older generation", hello("docker", 2, spec), nodes.DiagnosticGenerationMismatch},
		{"a newer generation", hello("docker", 4, spec), nodes.DiagnosticGenerationMismatch},
		{"another memory limit", hello("docker", 3, other), nodes.DiagnosticSpecificationMismatch},
		{"another max active", hello("docker", 3, func() sandbox.Specification { s := spec; s.MaxActive = 5; return s }()), nodes.DiagnosticSpecificationMismatch},
		{"no deployment digest (an older node agent)", &pb.HelloResponse{ProviderKind: "docker", Generation: 3}, nodes.DiagnosticSpecificationMismatch},
		{"kind before generation", hello("microsandbox", 2, other), nodes.DiagnosticProviderKindMismatch},
		{"generation before selection", hello("docker", 2, other), nodes.DiagnosticGenerationMismatch},
		{"no hello", nil, nodes.DiagnosticProviderKindMismatch},
	}
	for _, tc := range cases {
		if got := b.Check(tc.hello); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckBackend: a node serving the committed generation must report
// the backend it is bound to.
func TestCheckBackend(t *testing.T) {
	cases := []struct {
		name  string
		hello *pb.HelloResponse
		bound string
		want  string
	}{
		{"the bound backend", &pb.HelloResponse{BackendFingerprint: "docker:a"}, "docker:a", ""},
		{"another backend", &pb.HelloResponse{BackendFingerprint: "docker:b"}, "docker:a", nodes.DiagnosticBackendFingerprintMismatch},
		{"no fingerprint", &pb.HelloResponse{}, "docker:a", nodes.DiagnosticBackendFingerprintMismatch},
		{"not bound (never matches)", &pb.HelloResponse{BackendFingerprint: "docker:a"}, "", nodes.DiagnosticBackendFingerprintMismatch},
	}
	for _, tc := range cases {
		if got := nodes.CheckBackend(tc.hello, tc.bound); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
