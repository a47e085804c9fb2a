package docker_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/system"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
	"berth.dev/sandbox/testenv"
)

func TestDeclaration(t *testing.T) {
	contracttest.RunDeclaration(t, docker.New(nil, docker.Options{}))
}

func TestUnsupportedWithoutAClient(t *testing.T) {
	contracttest.RunUnsupported(t, func(*testing.T) sandbox.SandboxProvider {
		return docker.New(nil, docker.Options{})
	})
}

const validNode = `{"socket":"/run/docker.sock","image":"sha256:` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" +
	`","network":"none","extra_hosts":["core.berth.test:host-gateway","db:10.0.0.5"],"seccomp_profile":"/etc/berth/runtime/seccomp.json"}`

func TestDecodeNodeConfig(t *testing.T) {
	cfg, err := docker.DecodeNodeConfig([]byte(validNode))
	if err != nil {
		t.Fatalf("valid: %v", err)
	}
	if cfg.Network != "none" || len(cfg.ExtraHosts) != 2 || cfg.NestedSandbox {
		t.Fatalf("decoded %+v", cfg)
	}
	mutate := func(key string, value any) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(validNode), &m)
		if value == nil {
			delete(m, key)
		} else {
			m[key] = value
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	bad := map[string]string{
		"host network":        mutate("network", "host"),
		"container network":   mutate("network", "container:abc"),
		"empty network":       mutate("network", ""),
		"relative socket":     mutate("socket", "run/docker.sock"),
		"unclean socket":      mutate("socket", "/run/../docker.sock"),
		"image by tag":        mutate("image", "berth-runtime:dev"),
		"image short digest":  mutate("image", "sha256:abc"),
		"extra host no addr":  mutate("extra_hosts", []string{"core"}),
		"extra host bad addr": mutate("extra_hosts", []string{"core:not-an-ip"}),
		"seccomp relative":    mutate("seccomp_profile", "seccomp.json"),
		"missing seccomp":     mutate("seccomp_profile", nil),
		"unknown field":       mutate("privileged", true),
		"case alias":          strings.Replace(validNode, `"socket"`, `"Socket"`, 1),
		"duplicate key":       strings.Replace(validNode, `{`, `{"network":"bridge",`, 1),
		"trailing data":       validNode + `{}`,
		"not an object":       `[]`,
	}
	for name, raw := range bad {
		_, err := docker.DecodeNodeConfig([]byte(raw))
		if !errdefs.IsInvalid(err) {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		if strings.Contains(err.Error(), "not-an-ip") || strings.Contains(err.Error(), "berth-runtime:dev") {
			t.Errorf("%s: error echoes the value: %v", name, err)
		}
	}
}

func TestSpecificationDigestTracksWhatShapesASandbox(t *testing.T) {
	cfg, _ := docker.DecodeNodeConfig([]byte(validNode))
	spec := sandbox.Specification{Resources: resources, MaxActive: 4}
	base := docker.SpecificationDigest(cfg, spec)
	if base != docker.SpecificationDigest(cfg, spec) {
		t.Fatal("digest is not deterministic")
	}
	other := cfg
	other.NestedSandbox = true
	bigger := spec
	bigger.Resources.MemoryBytes *= 2
	counts := spec
	counts.MaxActive = 8
	if docker.SpecificationDigest(other, spec) == base || docker.SpecificationDigest(cfg, bigger) == base {
		t.Error("digest ignores a setting that shapes sandboxes")
	}
	if docker.SpecificationDigest(cfg, counts) != base {
		t.Error("digest changes with node counts, which do not shape a sandbox")
	}
}

// buildStandalone builds the adapter through the registration table the way
// a standalone node does, from the node configuration node, for an empty
// deployment configuration.
func buildStandalone(reg *providers.Registry, node docker.NodeConfig, installation string) (providers.Built, error) {
	raw, err := json.Marshal(node)
	if err != nil {
		return providers.Built{}, err
	}
	return reg.Build(context.Background(), docker.Kind, providers.LocalRequest{
		Deployment:    sandbox.EncodedConfiguration{Public: json.RawMessage(`{}`)},
		Node:          raw,
		Specification: sandbox.Specification{Resources: resources, MaxActive: 4},
		Options:       providers.LocalOptions{Standalone: true, InstallationID: installation},
	})
}

// TestBuildThroughTheRegistry constructs the adapter the way a node does:
// through the registration table, from a node configuration, against the
// real engine.
func TestBuildThroughTheRegistry(t *testing.T) {
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	reg, err := providers.Default()
	if err != nil {
		t.Fatal(err)
	}
	built, err := buildStandalone(reg, docker.NodeConfig{
		Socket: strings.TrimPrefix(host, "unix://"), Image: image, Network: "none",
		SeccompProfile: seccompProfilePath(),
	}, "0b6c3c3e-8a57-4d0e-9b53-2f7d3cf4c1aa")
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	defer built.Close()
	if err := built.Probe(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if !strings.HasPrefix(built.BackendFingerprint, "docker:") || len(built.BackendFingerprint) < 10 ||
		!strings.HasPrefix(built.SpecificationDigest, "sha256:") {
		t.Errorf("identity: %q %q", built.BackendFingerprint, built.SpecificationDigest)
	}
	if !filepath.IsAbs(built.DataRoot) {
		t.Errorf("data root %q, want the engine's DockerRootDir", built.DataRoot)
	}
	// A profile other than the shipped one is refused before any client.
	_, err = buildStandalone(reg, docker.NodeConfig{
		Socket: strings.TrimPrefix(host, "unix://"), Image: image, Network: "none",
		SeccompProfile: "/etc/hostname",
	}, "i")
	if !errdefs.IsInvalid(err) {
		t.Errorf("foreign seccomp profile: %v", err)
	}
}

// TestBuildNamesTheEnginesDataRoot: the built adapter names the engine's
// DockerRootDir for the node agent's disk measure, and names none when the
// engine's answer is not a clean absolute path.
func TestBuildNamesTheEnginesDataRoot(t *testing.T) {
	reg, err := providers.Default()
	if err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]string{
		"/var/lib/docker":        "/var/lib/docker",
		"/srv/docker-data":       "/srv/docker-data",
		"var/lib/docker":         "",
		"/var/lib/../lib/docker": "",
		"":                       "",
	} {
		sock := filepath.Join(t.TempDir(), "docker.sock")
		srv := dockertest.StartUnix(t, sock)
		srv.ConfigureInfo(func(i *system.Info) { i.DockerRootDir = answer })
		built, err := buildStandalone(reg, docker.NodeConfig{
			Socket: sock,
			Image:  "sha256:" + strings.Repeat("a", 64), Network: "none", SeccompProfile: seccompProfilePath(),
		}, "0b6c3c3e-8a57-4d0e-9b53-2f7d3cf4c1aa")
		if err != nil {
			t.Fatalf("%q: Build: %v", answer, err)
		}
		if built.DataRoot != want {
			t.Errorf("engine root %q: data root %q, want %q", answer, built.DataRoot, want)
		}
		_ = built.Close()
	}
}
