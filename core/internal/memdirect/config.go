package memdirect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// The lease bounds: what Create asks for and Renew sets again.
const (
	DefaultLease = 15 * time.Minute
	MinLease     = time.Minute
	MaxLease     = 24 * time.Hour
	// maxKey bounds the API key, in bytes.
	maxKey = 256
)

var templatePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Config is memdirect's typed configuration: the public template and
// lease selectors, and the write-only API key. The key is a
// sandbox.Credential, so printing a Config never shows it.
type Config struct {
	Template string
	Lease    time.Duration
	key      sandbox.Credential
}

// ProviderKind names memdirect.
func (Config) ProviderKind() string { return Kind }

// publicJSON is the public object: {"template": ..., "lease_seconds": ...}.
// A nil field is omitted (a change inherits it).
type publicJSON struct {
	Template     *string `json:"template,omitempty"`
	LeaseSeconds *int64  `json:"lease_seconds,omitempty"`
}

// credentialJSON is the credential object: {"api_key": ...}.
type credentialJSON struct {
	APIKey string `json:"api_key"`
}

// configAdapter is memdirect's sandbox.ConfigurationAdapter.
type configAdapter struct{}

var _ sandbox.ConfigurationAdapter = configAdapter{}

var (
	errPublic     = errdefs.Invalid("configuration.public", "must be one JSON object with only template and lease_seconds")
	errTemplate   = errdefs.Invalid("configuration.public.template", "required: 1 to 63 of [a-z0-9-], starting with a letter or digit")
	errLease      = errdefs.Invalid("configuration.public.lease_seconds", "must be 60 to 86400 seconds")
	errCredential = errdefs.Invalid("configuration.credential", "required: one JSON object with only a non-empty api_key of at most 256 bytes")
	errOtherKind  = errdefs.Invalid("configuration", "belongs to another provider")
)

// strict decodes exactly one JSON object of data into out, refusing
// unknown fields and trailing data.
func strict(data []byte, out any) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if dec.Decode(out) != nil {
		return false
	}
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

func parsePublic(data []byte) (publicJSON, error) {
	var p publicJSON
	if len(bytes.TrimSpace(data)) == 0 || bytes.TrimSpace(data)[0] != '{' || !strict(data, &p) {
		return publicJSON{}, errPublic
	}
	return p, nil
}

// apply overlays p's fields on cfg and checks the result.
func (p publicJSON) apply(cfg Config) (Config, error) {
	if p.Template != nil {
		cfg.Template = *p.Template
	}
	if p.LeaseSeconds != nil {
		cfg.Lease = time.Duration(*p.LeaseSeconds) * time.Second
		if *p.LeaseSeconds < int64(MinLease/time.Second) || *p.LeaseSeconds > int64(MaxLease/time.Second) {
			return Config{}, errLease
		}
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if !templatePattern.MatchString(cfg.Template) {
		return Config{}, errTemplate
	}
	if cfg.Lease < MinLease || cfg.Lease > MaxLease {
		return Config{}, errLease
	}
	return cfg, nil
}

func parseCredential(c sandbox.Credential) (sandbox.Credential, error) {
	var cred credentialJSON
	raw := c.Reveal()
	if len(raw) == 0 || !strict(raw, &cred) || cred.APIKey == "" || len(cred.APIKey) > maxKey {
		return sandbox.Credential{}, errCredential
	}
	return sandbox.NewCredential([]byte(cred.APIKey)), nil
}

// DecodeInput strictly parses a request's public and credential objects;
// the credential is required.
func (configAdapter) DecodeInput(in sandbox.ConfigurationInput) (sandbox.NativeConfiguration, error) {
	p, err := parsePublic(in.Public)
	if err != nil {
		return nil, err
	}
	cfg, err := p.apply(Config{})
	if err != nil {
		return nil, err
	}
	if cfg.key, err = parseCredential(in.Credential); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Encode writes the whitelisted selectors, no observations, and the key
// as the secret bytes the store seals.
func (configAdapter) Encode(n sandbox.NativeConfiguration) (sandbox.EncodedConfiguration, error) {
	cfg, ok := n.(Config)
	if !ok {
		return sandbox.EncodedConfiguration{}, errOtherKind
	}
	secs := int64(cfg.Lease / time.Second)
	pub, err := json.Marshal(publicJSON{Template: &cfg.Template, LeaseSeconds: &secs})
	if err != nil {
		return sandbox.EncodedConfiguration{}, errPublic
	}
	return sandbox.EncodedConfiguration{Public: pub, Observations: json.RawMessage(`{}`), Secret: cfg.key}, nil
}

// Decode restores stored selectors and the stored key, without asking
// the vendor anything. providers.BuildDirect gives it the selectors only
// (no secret) and composes the opened key through WithCredential; the
// stored key is read here for ResolveChange's inheritance.
func (configAdapter) Decode(stored sandbox.EncodedConfiguration) (sandbox.NativeConfiguration, error) {
	p, err := parsePublic(stored.Public)
	if err != nil {
		return nil, err
	}
	cfg, err := p.apply(Config{})
	if err != nil {
		return nil, err
	}
	cfg.key = stored.Secret
	return cfg, nil
}

// Normalize returns a copy with the default lease filled in.
func (configAdapter) Normalize(n sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	cfg, ok := n.(Config)
	if !ok {
		return nil, errOtherKind
	}
	return publicJSON{}.apply(cfg)
}

// ResolveChange applies a change: an omitted public object or field and
// an omitted credential are inherited from current.
func (configAdapter) ResolveChange(current sandbox.NativeConfiguration, change sandbox.ConfigurationInput) (sandbox.NativeConfiguration, error) {
	cur, ok := current.(Config)
	if !ok {
		return nil, errOtherKind
	}
	var p publicJSON
	if len(bytes.TrimSpace(change.Public)) > 0 {
		var err error
		if p, err = parsePublic(change.Public); err != nil {
			return nil, err
		}
	}
	cfg, err := p.apply(cur)
	if err != nil {
		return nil, err
	}
	if change.Credential.Len() > 0 {
		if cfg.key, err = parseCredential(change.Credential); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// Equal compares the selectors, never the key.
func (configAdapter) Equal(a, b sandbox.NativeConfiguration) bool {
	x, ok1 := a.(Config)
	y, ok2 := b.(Config)
	return ok1 && ok2 && x.Template == y.Template && x.Lease == y.Lease
}

// WithCredential composes cfg's selectors with credential, the key's
// bytes as Encode wrote them.
func (configAdapter) WithCredential(n sandbox.NativeConfiguration, credential []byte) (sandbox.NativeConfiguration, error) {
	cfg, ok := n.(Config)
	if !ok {
		return nil, errOtherKind
	}
	if len(credential) == 0 || len(credential) > maxKey {
		return nil, errCredential
	}
	cfg.key = sandbox.NewCredential(credential)
	return cfg, nil
}

// Requirements: a credential is required; no public origin (nothing
// runs in a memdirect sandbox, so no Runtime dials Core) and no
// configuration discovery.
func (configAdapter) Requirements() sandbox.ConfigurationRequirements {
	return sandbox.ConfigurationRequirements{
		Credential:   sandbox.Required,
		PublicOrigin: sandbox.Required,
		Discovery:    providercontract.Unsupported(ReasonNoDiscovery),
	}
}

// DiscoverConfiguration is unsupported.
func (configAdapter) DiscoverConfiguration(context.Context, sandbox.DiscoveryQuery) (sandbox.Catalog, error) {
	return sandbox.Catalog{}, &providercontract.UnsupportedError{Operation: "DiscoverConfiguration", Code: ReasonNoDiscovery}
}
