package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providerapi"
)

// Registration is the Docker provider's registry entry.
func Registration() providerapi.Registration {
	return providerapi.Registration{
		Kind:                  Kind,
		Mode:                  providerapi.ModeNodes,
		ValidateSpecification: func(sandbox.Specification) error { return nil },
		ValidateResources:     func(sandbox.Resources) error { return nil },
		Configuration:         nodeconfig.Adapter{Kind: Kind},
		Operations:            Operations(),
		Suspension:            DefaultSuspension,
		RuntimeInput:          providerapi.RuntimeInputPolicy{AcceptsPinnedRuntime: true},
		Artifacts: []providerapi.NodeArtifact{
			{Path: "bin/berth-nodeagent", Suffix: "linux-amd64", Role: providerapi.RoleNode},
			{Path: "runtime/berth-runtime", Suffix: "linux-amd64", Role: providerapi.RoleRuntime},
			{Path: "runtime/seccomp.json", Suffix: "json", Role: providerapi.RolePolicy},
			{Path: "runtime/berth-runtime-image.tar", Suffix: "tar", Role: providerapi.RoleImage},
		},
		BuildLocal: buildLocal,
	}
}

// DefaultSuspension is the registry's suspension default for Docker: a
// Session idle for 15 minutes may be suspended, and its snapshot is kept
// for 7 days. Core's deployment logic applies them to a candidate without
// a suspension policy (PreviewDeployment shows them); a deployment may set
// its own or turn suspension off.
var DefaultSuspension = sandbox.SuspensionPolicy{Idle: 15 * time.Minute, Retention: 7 * 24 * time.Hour}

// buildLocal constructs the adapter from the node's configuration: it
// verifies the shipped seccomp profile, connects to the configured socket
// (never DOCKER_HOST) and reads the engine's identity for the backend
// fingerprint and its data root (DockerRootDir, where containers' writable
// layers and volumes live; kept only when it is a clean absolute path). It
// creates nothing.
func buildLocal(ctx context.Context, _ sandbox.NativeConfiguration, req providerapi.LocalRequest) (providerapi.Built, error) {
	cfg, err := DecodeNodeConfig(req.Node)
	if err != nil {
		return providerapi.Built{}, err
	}
	seccomp, err := LoadSeccompProfile(cfg.SeccompProfile)
	if err != nil {
		return providerapi.Built{}, err
	}
	cli, err := NewClient("unix://" + cfg.Socket)
	if err != nil {
		return providerapi.Built{}, err
	}
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil || info.Info.ID == "" {
		return providerapi.Built{}, errors.Join(&sandbox.ProbeError{Code: ProbeEngineUnreachable}, cli.Close())
	}
	intents := ""
	if req.Options.GenerationStateDirectory != "" {
		intents = filepath.Join(req.Options.GenerationStateDirectory, IntentsDirectory)
	}
	p := New(cli, Options{
		InstallationID:  req.Options.InstallationID,
		Config:          cfg,
		Seccomp:         seccomp,
		Resources:       req.Specification.Resources,
		IntentDirectory: intents,
	})
	return providerapi.Built{
		Provider:            p,
		Probe:               p.Probe,
		Housekeep:           p.Housekeep,
		InstallationID:      req.Options.InstallationID,
		BackendFingerprint:  "docker:" + info.Info.ID,
		SpecificationDigest: SpecificationDigest(cfg, req.Specification),
		DataRoot:            dataRoot(info.Info.DockerRootDir),
		Close:               cli.Close,
	}, nil
}

// SpecificationDigest identifies everything that shapes a sandbox on this
// node: the image, network, extra hosts, nested mode, seccomp profile and
// the deployment's resources. Two nodes with the same digest create
// identical containers.
func SpecificationDigest(cfg NodeConfig, spec sandbox.Specification) string {
	doc, _ := json.Marshal(struct {
		Kind       string
		Image      string
		Network    string
		ExtraHosts []string
		Nested     bool
		Seccomp    string
		Resources  sandbox.Resources
	}{Kind, cfg.Image, cfg.Network, cfg.ExtraHosts, cfg.NestedSandbox, SeccompProfileSHA256, spec.Resources})
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// dataRoot returns the engine's data root when it is a clean absolute path,
// else "" (the engine's answer is outside input; the node agent then
// measures disk on its state directory).
func dataRoot(dir string) string {
	if !cleanAbs(dir) {
		return ""
	}
	return dir
}
