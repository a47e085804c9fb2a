package e2b

import (
	"context"
	"path/filepath"

	"berth.dev/sandbox"
	"berth.dev/sandbox/providerapi"
)

// StateSubdirectory is the adapter's private directory under
// ProcessPaths.State (its create receipts).
const StateSubdirectory = "e2b"

// Registration is the E2B provider's registry entry: a direct provider
// (Core constructs it), the API key required, Core's public origin
// required, no checkpoints and so no suspension defaults. Its artifacts
// are what an operator builds the Runtime template from (deploy/e2b): the
// release's berth-runtime and the template's definition (artifact paths
// are lower case: the release ships it as e2b.Dockerfile, the name E2B's
// CLI looks for); nothing is installed on a host.
func Registration() providerapi.Registration {
	return providerapi.Registration{
		Kind:                  Kind,
		Mode:                  providerapi.ModeDirect,
		ValidateSpecification: func(sandbox.Specification) error { return nil },
		ValidateResources:     func(sandbox.Resources) error { return nil },
		Configuration:         configAdapter{},
		Operations:            Operations(),
		Suspension:            sandbox.SuspensionPolicy{},
		RuntimeInput:          providerapi.RuntimeInputPolicy{AcceptsPinnedRuntime: true},
		Artifacts: []providerapi.NodeArtifact{
			{Path: "runtime/berth-runtime", Suffix: "linux-amd64", Role: providerapi.RoleRuntime},
			{Path: "e2b/e2b.dockerfile", Suffix: "dockerfile", Role: providerapi.RoleImage},
		},
		BuildDirect: buildDirect,
	}
}

// buildDirect constructs the adapter: it validates the composed
// configuration and the installation, creates the private state
// directory and sends nothing (the probe asks E2B).
//
// The backend fingerprint is "e2b:" + api_url. E2B offers no read of the
// key's team; a digest of the key would name the team only through the
// key itself, and a fingerprint is shown and stored in the clear, where
// an unsalted digest of a short secret invites offline guessing. A key
// of another team is refused by VerifyCredential instead.
func buildDirect(_ context.Context, n sandbox.NativeConfiguration, req providerapi.DirectRequest) (providerapi.DirectBuilt, error) {
	cfg, ok := n.(Config)
	if !ok {
		return providerapi.DirectBuilt{}, errOtherKind
	}
	if err := req.Paths.Validate(); err != nil {
		return providerapi.DirectBuilt{}, err
	}
	p, err := New(Options{
		Config:         cfg,
		InstallationID: req.InstallationID,
		StateDirectory: filepath.Join(req.Paths.State, StateSubdirectory),
	})
	if err != nil {
		return providerapi.DirectBuilt{}, err
	}
	return providerapi.DirectBuilt{
		Provider:           p,
		Probe:              p.Probe,
		Close:              p.close,
		Fence:              p.fence,
		BackendFingerprint: "e2b:" + cfg.APIURL,
	}, nil
}
