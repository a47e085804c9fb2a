package refadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providerapi"
)

// Registration returns the reference adapter's registration. Tests build
// their own registries with it; the production table never holds it.
func Registration() providerapi.Registration {
	return providerapi.Registration{
		Kind:                  Kind,
		Mode:                  providerapi.ModeNodes,
		ValidateSpecification: func(sandbox.Specification) error { return nil },
		ValidateResources:     func(sandbox.Resources) error { return nil },
		Configuration:         nodeconfig.Adapter{Kind: Kind},
		Operations:            Operations(),
		RuntimeInput:          providerapi.RuntimeInputPolicy{AcceptsPinnedRuntime: true},
		Artifacts: []providerapi.NodeArtifact{
			{Path: "reference/berth-reference-node", Suffix: "linux-amd64", Role: providerapi.RoleNode},
		},
		BuildLocal: buildLocal,
	}
}

// NodeConfig is the node-local configuration: where the native service is.
type NodeConfig struct {
	Endpoint string `json:"endpoint"`
}

func buildLocal(_ context.Context, _ sandbox.NativeConfiguration, req providerapi.LocalRequest) (providerapi.Built, error) {
	var nc NodeConfig
	dec := json.NewDecoder(bytes.NewReader(req.Node))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nc); err != nil || nc.Endpoint == "" {
		return providerapi.Built{}, errdefs.Invalid("node.endpoint", "required")
	}
	client := NewClient()
	p := New(nc.Endpoint, req.Options.InstallationID, client)
	return providerapi.Built{
		Provider:            p,
		Probe:               p.probe,
		InstallationID:      req.Options.InstallationID,
		BackendFingerprint:  "reference:" + nc.Endpoint,
		SpecificationDigest: "reference-spec-v1",
		Close:               func() error { client.CloseIdleConnections(); return nil },
	}, nil
}

// probe checks that the native service answers.
func (p *Provider) probe(ctx context.Context) error {
	status, err := p.call(ctx, http.MethodGet, resourcePath("berth-probe", ""), nil, nil)
	if err != nil || (status != http.StatusNotFound && status != http.StatusOK) {
		return errors.New("probe: native_unreachable")
	}
	return nil
}
