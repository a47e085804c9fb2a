package microsandbox_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/microsandbox"
	"berth.dev/sandbox/providers"
)

const installation = "0b6c3c3e-8a57-4d0e-9b53-2f7d3cf4c1aa"

// nodeConfig is a valid node section whose msb need not exist: building
// never runs msb.
func nodeConfig(home string) map[string]any {
	return map[string]any{
		"msb": "/opt/berth/microsandbox/bin/msb", "home": home,
		"image": "berth-runtime:0.13.0", "image_digest": pinnedDigest, "network": "none",
	}
}

// build constructs the adapter through the production registration table,
// the way a node agent serving a generation does.
func build(t *testing.T, node map[string]any, spec sandbox.Specification) (providers.Built, error) {
	t.Helper()
	reg, err := providers.Default()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(node)
	if err != nil {
		t.Fatal(err)
	}
	return reg.Build(context.Background(), "microsandbox", providers.LocalRequest{
		Deployment:    sandbox.EncodedConfiguration{Public: json.RawMessage(`{}`)},
		Node:          raw,
		Specification: spec,
		Options:       providers.LocalOptions{GenerationStateDirectory: t.TempDir(), InstallationID: installation, Generation: 1},
	})
}

var spec = sandbox.Specification{Resources: oneSandbox, MaxActive: 4}

// TestBuildThroughTheRegistry: a node agent builds the adapter from its
// node section without running msb and without virtualization, so a node
// on a host that cannot boot a microVM is served and reports why through
// its probe. The backend fingerprint names msb's home (stable across
// builds, another for another home); the specification digest changes
// with what shapes a sandbox and not with node counts.
func TestBuildThroughTheRegistry(t *testing.T) {
	home := filepath.Join(t.TempDir(), "msb")
	built, err := build(t, nodeConfig(home), spec)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	defer built.Close()
	if built.InstallationID != installation || built.DataRoot != home {
		t.Errorf("built installation %q, data root %q", built.InstallationID, built.DataRoot)
	}
	if !strings.HasPrefix(built.BackendFingerprint, "microsandbox:") || len(built.BackendFingerprint) < len("microsandbox:")+32 {
		t.Errorf("backend fingerprint %q", built.BackendFingerprint)
	}
	// The probe runs (msb is absent here: whichever prerequisite this
	// host lacks first, it is a fixed code).
	switch code := sandbox.ProbeCode(built.Probe(context.Background())); code {
	case "kvm_device_missing", "hardware_virtualization_unavailable", "host_capacity_insufficient", "msb_missing":
	default:
		t.Errorf("probe code %q", code)
	}
	again, err := build(t, nodeConfig(home), sandbox.Specification{Resources: oneSandbox, MaxActive: 9, MaxRetained: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.BackendFingerprint != built.BackendFingerprint {
		t.Errorf("the same msb home has fingerprints %q and %q", built.BackendFingerprint, again.BackendFingerprint)
	}
	if again.SpecificationDigest != built.SpecificationDigest {
		t.Error("the specification digest changes with node counts, which do not shape a sandbox")
	}
	other, err := build(t, nodeConfig(filepath.Join(t.TempDir(), "msb")), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.BackendFingerprint == built.BackendFingerprint {
		t.Error("two msb homes share a backend fingerprint")
	}
	for name, change := range map[string]func(node map[string]any, s *sandbox.Specification){
		"image": func(n map[string]any, _ *sandbox.Specification) { n["image"] = "berth-runtime:0.14.0" },
		"image digest": func(n map[string]any, _ *sandbox.Specification) {
			n["image_digest"] = "sha256:" + strings.Repeat("1", 64)
		},
		"network": func(n map[string]any, _ *sandbox.Specification) { n["network"] = "public" },
		"memory":  func(_ map[string]any, s *sandbox.Specification) { s.Resources.MemoryBytes *= 2 },
		"cpu":     func(_ map[string]any, s *sandbox.Specification) { s.Resources.CPUMillis *= 2 },
		"disk":    func(_ map[string]any, s *sandbox.Specification) { s.Resources.DiskBytes *= 2 },
	} {
		node, s := nodeConfig(home), spec
		change(node, &s)
		b, err := build(t, node, s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b.SpecificationDigest == built.SpecificationDigest || !strings.HasPrefix(b.SpecificationDigest, "sha256:") {
			t.Errorf("%s: specification digest %q unchanged", name, b.SpecificationDigest)
		}
		_ = b.Close()
	}
}

// TestBuildRefusals: an invalid node section is refused before anything
// is created, and an msb home the node agent cannot use is a fixed
// diagnostic, not native text.
func TestBuildRefusals(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "msb")
	node := nodeConfig(home)
	node["image_digest"] = "sha256:abc"
	if _, err := build(t, node, spec); !errdefs.IsInvalid(err) {
		t.Fatalf("invalid node section: %v", err)
	} else if field, _ := errdefs.Field(err); field != "node.image_digest" {
		t.Fatalf("invalid node section: field %q (%v), want node.image_digest", field, err)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Fatalf("a refused build created msb's home: %v", err)
	}
	if err := os.WriteFile(home, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := build(t, nodeConfig(home), spec)
	if code := sandbox.ProbeCode(err); code != "msb_home_unusable" {
		t.Fatalf("msb home is a file: %v (code %q)", err, code)
	}
	if strings.Contains(err.Error(), home) {
		t.Errorf("the error names the path: %v", err)
	}
}

// TestExampleNodeConfiguration: the shipped example configuration
// (deploy/examples/nodeagent-microsandbox.json) names this provider and
// its node section is valid once the operator fills in the image digest,
// its one placeholder that cannot pass as it is.
func TestExampleNodeConfiguration(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "examples", "nodeagent-microsandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Provider string          `json:"provider"`
		Node     json.RawMessage `json:"node"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if file.Provider != microsandbox.Kind {
		t.Fatalf("provider %q", file.Provider)
	}
	if _, err := microsandbox.DecodeNodeConfig(file.Node); err == nil {
		t.Fatal("the example's placeholder digest passes validation")
	} else if field, _ := errdefs.Field(err); field != "node.image_digest" {
		t.Fatalf("the example fails on %q (%v), want only its image_digest placeholder", field, err)
	}
	filled := strings.Replace(string(file.Node), "sha256:REPLACE-WITH-THE-DIGEST-MSB-IMAGE-INSPECT-PRINTS", pinnedDigest, 1)
	cfg, err := microsandbox.DecodeNodeConfig([]byte(filled))
	if err != nil {
		t.Fatalf("the example with a digest: %v", err)
	}
	if filepath.Dir(filepath.Dir(cfg.MSB)) != "/opt/berth/microsandbox" || !strings.HasPrefix(cfg.Home, "/var/lib/berth-nodeagent/") {
		t.Errorf("the example's msb %q and home %q are not the README's install layout", cfg.MSB, cfg.Home)
	}
}
