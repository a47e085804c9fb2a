package refadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/providers"
)

// Registration returns the reference adapter's registration. Tests build
// their own registries with it; the production table never holds it.
func Registration() providers.Registration {
	return providers.Registration{
		Kind:                  Kind,
		Mode:                  providers.ModeNodes,
		ValidateSpecification: func(sandbox.Specification) error { return nil },
		ValidateResources:     func(sandbox.Resources) error { return nil },
		Configuration:         ConfigurationAdapter{},
		Operations:            Operations(),
		RuntimeInput:          providers.RuntimeInputPolicy{AcceptsPinnedRuntime: true},
		Artifacts: []providers.NodeArtifact{
			{Path: "reference/berth-reference-node", Suffix: "linux-amd64", Role: providers.RoleNode},
		},
		BuildLocal: buildLocal,
	}
}

// NodeConfig is the node-local configuration: where the native service is.
type NodeConfig struct {
	Endpoint string `json:"endpoint"`
}

func buildLocal(_ context.Context, _ sandbox.NativeConfiguration, req providers.LocalRequest) (providers.Built, error) {
	var nc NodeConfig
	dec := json.NewDecoder(bytes.NewReader(req.Node))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nc); err != nil || nc.Endpoint == "" {
		return providers.Built{}, errdefs.Invalid("node.endpoint", "required")
	}
	client := NewClient()
	p := New(nc.Endpoint, req.Options.InstallationID, client)
	return providers.Built{
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

// config is the (empty) deployment configuration of a node provider.
type config struct{}

func (config) ProviderKind() string { return Kind }

// ConfigurationAdapter is the node-provider configuration adapter: it
// accepts only an empty public object, rejects credentials and has no
// discovery or credential replacement.
type ConfigurationAdapter struct{}

var _ sandbox.ConfigurationAdapter = ConfigurationAdapter{}

func emptyObject(raw json.RawMessage) bool {
	if len(bytes.TrimSpace(raw)) == 0 {
		return true
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil || m == nil || len(m) != 0 || dec.More() {
		return false
	}
	return true
}

// DecodeInput accepts only an empty public object and no credential.
func (ConfigurationAdapter) DecodeInput(in sandbox.ConfigurationInput) (sandbox.NativeConfiguration, error) {
	if len(in.Credential) > 0 {
		return nil, errdefs.Invalid("configuration.credential", "this provider takes no credential")
	}
	if !emptyObject(in.Public) {
		return nil, errdefs.Invalid("configuration.public", "must be an empty object")
	}
	return config{}, nil
}

// Encode produces the empty public object.
func (ConfigurationAdapter) Encode(cfg sandbox.NativeConfiguration) (sandbox.EncodedConfiguration, error) {
	if _, ok := cfg.(config); !ok {
		return sandbox.EncodedConfiguration{}, fmt.Errorf("encode: %w", errdefs.ErrInvalid)
	}
	return sandbox.EncodedConfiguration{Public: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`)}, nil
}

// Decode restores the empty configuration.
func (ConfigurationAdapter) Decode(stored sandbox.EncodedConfiguration) (sandbox.NativeConfiguration, error) {
	if !emptyObject(stored.Public) || len(stored.Secret) > 0 {
		return nil, errdefs.Invalid("configuration.public", "must be an empty object")
	}
	return config{}, nil
}

// Normalize returns the configuration unchanged (it has no fields).
func (ConfigurationAdapter) Normalize(cfg sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	if _, ok := cfg.(config); !ok {
		return nil, fmt.Errorf("normalize: %w", errdefs.ErrInvalid)
	}
	return config{}, nil
}

// ResolveChange accepts only an empty change.
func (a ConfigurationAdapter) ResolveChange(current sandbox.NativeConfiguration, change sandbox.ConfigurationInput) (sandbox.NativeConfiguration, error) {
	if _, err := a.DecodeInput(change); err != nil {
		return nil, err
	}
	return a.Normalize(current)
}

// Equal reports whether both are this adapter's configuration.
func (ConfigurationAdapter) Equal(a, b sandbox.NativeConfiguration) bool {
	_, okA := a.(config)
	_, okB := b.(config)
	return okA && okB
}

// WithCredential is unsupported: a node provider has no credential.
func (ConfigurationAdapter) WithCredential(sandbox.NativeConfiguration, []byte) (sandbox.NativeConfiguration, error) {
	return nil, &providercontract.UnsupportedError{Operation: "WithCredential", Code: reasonNoCredential}
}

// Requirements declares no credential, no public origin and no discovery.
func (ConfigurationAdapter) Requirements() sandbox.ConfigurationRequirements {
	return sandbox.ConfigurationRequirements{
		Credential:   sandbox.NotRequired,
		PublicOrigin: sandbox.NotRequired,
		Discovery:    providercontract.Unsupported(reasonNoDiscovery),
	}
}

// DiscoverConfiguration is unsupported for a node provider.
func (ConfigurationAdapter) DiscoverConfiguration(context.Context, sandbox.DiscoveryQuery) (sandbox.Catalog, error) {
	return sandbox.Catalog{}, &providercontract.UnsupportedError{Operation: "DiscoverConfiguration", Code: reasonNoDiscovery}
}
