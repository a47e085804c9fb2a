package microsandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"berth.dev/sandbox"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providerapi"
)

// Registration is the microsandbox provider's registry entry.
func Registration() providerapi.Registration {
	return providerapi.Registration{
		Kind:                  Kind,
		Mode:                  providerapi.ModeNodes,
		ValidateSpecification: func(sandbox.Specification) error { return nil },
		ValidateResources:     func(sandbox.Resources) error { return nil },
		Configuration:         nodeconfig.Adapter{Kind: Kind},
		Operations:            Operations(),
		// No suspension defaults: the declaration supports no checkpoints.
		Suspension:   sandbox.SuspensionPolicy{},
		RuntimeInput: providerapi.RuntimeInputPolicy{AcceptsPinnedRuntime: true},
		Artifacts: []providerapi.NodeArtifact{
			{Path: "bin/berth-nodeagent", Suffix: "linux-amd64", Role: providerapi.RoleNode},
			{Path: "runtime/berth-runtime", Suffix: "linux-amd64", Role: providerapi.RoleRuntime},
			{Path: "runtime/berth-runtime-image.tar", Suffix: "tar", Role: providerapi.RoleImage},
			// The digest msb gives that archive once loaded: the node
			// section's image_digest.
			{Path: "runtime/berth-runtime-image.msb-digest", Suffix: "msb-digest", Role: providerapi.RoleImage},
			// The pinned msb and libkrunfw, in the layout msb needs
			// (libkrunfw in ../lib beside the executable).
			{Path: "microsandbox/bin/msb", Suffix: "linux-amd64", Role: providerapi.RoleNode},
			{Path: "microsandbox/lib/" + PinnedLibkrunfw, Suffix: "linux-amd64", Role: providerapi.RoleNode},
		},
		BuildLocal: buildLocal,
	}
}

// BackendIDFile is the file in msb's home that holds the backend's
// identity: a random id the adapter writes once, the first time a node
// agent builds on that home. It names the native resource namespace (msb's
// database and sandboxes live in the home), so a home that is wiped and
// recreated is a new backend even at the same path.
const BackendIDFile = "berth-backend-id"

var backendIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// buildLocal constructs the adapter from the node's configuration. It runs
// no msb and checks no prerequisite (the probe does, so a node on a host
// that cannot boot a microVM is served and reports why); the only thing it
// creates is msb's home with the backend id, once.
func buildLocal(_ context.Context, _ sandbox.NativeConfiguration, req providerapi.LocalRequest) (providerapi.Built, error) {
	cfg, err := DecodeNodeConfig(req.Node)
	if err != nil {
		return providerapi.Built{}, err
	}
	id, err := backendID(cfg.Home)
	if err != nil {
		return providerapi.Built{}, &sandbox.ProbeError{Code: ProbeHomeUnusable}
	}
	p := New(Exec{Path: cfg.MSB, Home: cfg.Home}, Options{
		InstallationID: req.Options.InstallationID,
		Config:         cfg,
		Resources:      req.Specification.Resources,
		StateDirectory: req.Options.GenerationStateDirectory,
	})
	return providerapi.Built{
		Provider:            p,
		Probe:               p.Probe,
		InstallationID:      req.Options.InstallationID,
		BackendFingerprint:  "microsandbox:" + id,
		SpecificationDigest: SpecificationDigest(cfg, req.Specification),
		DataRoot:            cfg.Home,
		Close:               func() error { return nil },
	}, nil
}

// backendID returns the backend id of msb's home, creating the home (0700)
// and the id (0600) when absent. The id is written to a private temporary
// file and hard-linked into place, so concurrent builds on one home agree
// on one id and none reads a partial one.
func backendID(home string) (string, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(home, BackendIDFile)
	if id, err := readBackendID(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(home, ".berth-backend-id-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(raw[:]) + "\n")
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return "", err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return readBackendID(path)
}

func readBackendID(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSuffix(string(data), "\n")
	if !backendIDPattern.MatchString(id) {
		return "", errors.New("malformed backend id")
	}
	return id, nil
}

// SpecificationDigest identifies everything that shapes a sandbox on this
// node: the pinned msb release (and so libkrunfw, the guest kernel), the
// image and its digest, the network and the deployment's resources. Two
// nodes with the same digest create identical microVMs.
func SpecificationDigest(cfg NodeConfig, spec sandbox.Specification) string {
	doc, _ := json.Marshal(struct {
		Kind        string
		MSB         string
		Libkrunfw   string
		Image       string
		ImageDigest string
		Network     string
		Resources   sandbox.Resources
	}{Kind, PinnedVersion, PinnedLibkrunfw, cfg.Image, cfg.ImageDigest, cfg.Network, spec.Resources})
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:])
}
