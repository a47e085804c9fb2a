package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/strictjson"
)

// Kind is the E2B provider's kind.
const Kind = "e2b"

// The selectors' defaults and bounds.
const (
	// DefaultAPIURL is E2B's hosted control plane.
	DefaultAPIURL = "https://api.e2b.app"
	// DefaultDomain is the sandbox domain used when the create answer
	// names none and no sandbox_url is set.
	DefaultDomain = "e2b.app"
	// DefaultLease is what Create asks for and Renew sets again.
	DefaultLease = 15 * time.Minute
	// MinLease is three times Core's 5-minute keepalive period, so two
	// lost or late Renews in a row still leave the sandbox alive.
	MinLease = 5 * time.Minute
	// MaxLease is E2B's longest plan maximum (24 h, Pro); a shorter plan
	// clamps the lease itself (docs/e2b-receipts.md §1.5).
	MaxLease = 24 * time.Hour
	// maxKey bounds the API key, in bytes.
	maxKey = 256
	// maxURL bounds an endpoint selector, in bytes.
	maxURL = 256
	// maxPublic bounds the public object, in bytes.
	maxPublic = 4 << 10
	// maxTemplate bounds a template reference, in bytes.
	maxTemplate = 128
)

// The template reference grammar (docs/e2b-receipts.md §3.2), canonical
// lower-case form only: [namespace/]alias[:tag] or a template id.
var (
	namePattern = regexp.MustCompile(`^[a-z0-9_-]{1,63}$`)
	tagPattern  = regexp.MustCompile(`^[a-z0-9_.-]{1,63}$`)
	uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// The validators' errors: fixed field names and reasons, never the value.
var (
	errPublic     = errdefs.Invalid("configuration.public", "must be one JSON object with only api_url, sandbox_url, template and lease_seconds")
	errAPIURL     = errdefs.Invalid("configuration.public.api_url", "must be an https URL with a host and no path, query, fragment or user (http only for a loopback host)")
	errSandboxURL = errdefs.Invalid("configuration.public.sandbox_url", "must be an https URL with a host and no path, query, fragment or user (http only for a loopback host)")
	errTemplate   = errdefs.Invalid("configuration.public.template", "required: [namespace/]alias[:tag] in lower case ([a-z0-9_-], tag [a-z0-9_.-], at most 128 bytes)")
	errLease      = errdefs.Invalid("configuration.public.lease_seconds", "must be 300 to 86400 seconds")
	errCredential = errdefs.Invalid("configuration.credential", "required: one JSON object with only a non-empty api_key of at most 256 printable bytes")
	errOtherKind  = errdefs.Invalid("configuration", "belongs to another provider")
)

// Config is the E2B adapter's typed configuration: the public selectors
// and the write-only API key. The key is a sandbox.Credential, so
// printing a Config never shows it.
type Config struct {
	// APIURL is the control plane's base URL.
	APIURL string
	// SandboxURL is one envd URL for every sandbox (E2B routes on the
	// E2b-Sandbox-Id header); empty: https://49983-<id>.<domain>.
	SandboxURL string
	// Template is the Runtime template's reference.
	Template string
	// Lease is the create timeout and the Renew value.
	Lease time.Duration
	key   sandbox.Credential
}

// ProviderKind names E2B.
func (Config) ProviderKind() string { return Kind }

// publicJSON is the public object. A nil field is omitted (a change
// inherits it).
type publicJSON struct {
	APIURL       *string `json:"api_url,omitempty"`
	SandboxURL   *string `json:"sandbox_url,omitempty"`
	Template     *string `json:"template,omitempty"`
	LeaseSeconds *int64  `json:"lease_seconds,omitempty"`
}

// credentialJSON is the credential object: {"api_key": ...}.
type credentialJSON struct {
	APIKey string `json:"api_key"`
}

// ValidateEndpoint checks an endpoint selector (api_url, sandbox_url):
// an absolute URL in canonical form, https, or http for a loopback host
// only (the loopback fixture), with no user, path, query or fragment. It
// is the one endpoint validator of the admin API, berthctl (through the
// registration's configuration adapter) and the adapter.
func ValidateEndpoint(raw string) bool {
	if raw == "" || len(raw) > maxURL {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" ||
		u.ForceQuery || u.Path != "" || u.RawPath != "" || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if host == "" || strings.HasSuffix(u.Host, ":") || host != strings.ToLower(host) || u.String() != raw {
		return false
	}
	if p := u.Port(); p != "" && (p[0] == '0' || len(p) > 5) {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		return loopbackHost(host)
	}
	return false
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ValidateTemplate checks a template reference: [namespace/]alias[:tag]
// in the canonical lower-case form E2B would not rewrite (no spaces, no
// upper case, no ":default", no tag that looks like a UUID), at most 128
// bytes.
func ValidateTemplate(ref string) bool {
	if ref == "" || len(ref) > maxTemplate {
		return false
	}
	rest := ref
	if ns, alias, ok := strings.Cut(rest, "/"); ok {
		if !namePattern.MatchString(ns) {
			return false
		}
		rest = alias
	}
	alias, tag, hasTag := strings.Cut(rest, ":")
	if !namePattern.MatchString(alias) {
		return false
	}
	if hasTag && (!tagPattern.MatchString(tag) || tag == "default" || uuidPattern.MatchString(tag)) {
		return false
	}
	return true
}

// ValidateLease checks a lease: whole seconds from MinLease to MaxLease.
func ValidateLease(d time.Duration) bool {
	return d >= MinLease && d <= MaxLease && d%time.Second == 0
}

// validKey accepts a non-empty key of at most maxKey printable ASCII
// bytes (it travels in an HTTP header).
func validKey(key []byte) bool {
	if len(key) == 0 || len(key) > maxKey {
		return false
	}
	for _, b := range key {
		if b <= ' ' || b >= 0x7f {
			return false
		}
	}
	return true
}

func parsePublic(data []byte) (publicJSON, error) {
	var p publicJSON
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' || strictjson.Decode(data, &p, maxPublic) != nil {
		return publicJSON{}, errPublic
	}
	return p, nil
}

// apply overlays p's fields on cfg, fills the defaults and checks the
// result.
func (p publicJSON) apply(cfg Config) (Config, error) {
	if p.APIURL != nil {
		cfg.APIURL = *p.APIURL
		if !ValidateEndpoint(cfg.APIURL) {
			return Config{}, errAPIURL
		}
	}
	if p.SandboxURL != nil {
		cfg.SandboxURL = *p.SandboxURL
		if !ValidateEndpoint(cfg.SandboxURL) {
			return Config{}, errSandboxURL
		}
	}
	if p.Template != nil {
		cfg.Template = *p.Template
	}
	if p.LeaseSeconds != nil {
		s := *p.LeaseSeconds
		if s < int64(MinLease/time.Second) || s > int64(MaxLease/time.Second) {
			return Config{}, errLease
		}
		cfg.Lease = time.Duration(s) * time.Second
	}
	return cfg.check()
}

// check fills the defaults and validates every selector.
func (cfg Config) check() (Config, error) {
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	switch {
	case !ValidateEndpoint(cfg.APIURL):
		return Config{}, errAPIURL
	case cfg.SandboxURL != "" && !ValidateEndpoint(cfg.SandboxURL):
		return Config{}, errSandboxURL
	case !ValidateTemplate(cfg.Template):
		return Config{}, errTemplate
	case !ValidateLease(cfg.Lease):
		return Config{}, errLease
	}
	return cfg, nil
}

func parseCredential(c sandbox.Credential) (sandbox.Credential, error) {
	var cred credentialJSON
	raw := c.Reveal()
	if len(raw) == 0 || strictjson.Decode(raw, &cred, 4*maxKey) != nil || !validKey([]byte(cred.APIKey)) {
		return sandbox.Credential{}, errCredential
	}
	return sandbox.NewCredential([]byte(cred.APIKey)), nil
}

// configAdapter is E2B's sandbox.ConfigurationAdapter.
type configAdapter struct{}

var _ sandbox.ConfigurationAdapter = configAdapter{}

// Configuration returns E2B's configuration adapter, the one the
// registration holds.
func Configuration() sandbox.ConfigurationAdapter { return configAdapter{} }

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
	cfg, err := cfg.check()
	if err != nil {
		return sandbox.EncodedConfiguration{}, err
	}
	secs := int64(cfg.Lease / time.Second)
	pub := publicJSON{APIURL: &cfg.APIURL, Template: &cfg.Template, LeaseSeconds: &secs}
	if cfg.SandboxURL != "" {
		pub.SandboxURL = &cfg.SandboxURL
	}
	data, err := json.Marshal(pub)
	if err != nil {
		return sandbox.EncodedConfiguration{}, errPublic
	}
	return sandbox.EncodedConfiguration{Public: data, Observations: json.RawMessage(`{}`), Secret: cfg.key}, nil
}

// Decode restores stored selectors and the stored key, asking E2B
// nothing. providers.BuildDirect gives it the selectors only and
// composes the opened key through WithCredential.
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

// Normalize returns a copy with the defaults filled in.
func (configAdapter) Normalize(n sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	cfg, ok := n.(Config)
	if !ok {
		return nil, errOtherKind
	}
	return cfg.check()
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

// Equal compares the normalized selectors, never the key.
func (configAdapter) Equal(a, b sandbox.NativeConfiguration) bool {
	x, ok1 := a.(Config)
	y, ok2 := b.(Config)
	if !ok1 || !ok2 {
		return false
	}
	x, err1 := x.check()
	y, err2 := y.check()
	return err1 == nil && err2 == nil && x.APIURL == y.APIURL && x.SandboxURL == y.SandboxURL &&
		x.Template == y.Template && x.Lease == y.Lease
}

// WithCredential composes cfg's selectors with credential, the key's
// bytes as Encode wrote them.
func (configAdapter) WithCredential(n sandbox.NativeConfiguration, credential []byte) (sandbox.NativeConfiguration, error) {
	cfg, ok := n.(Config)
	if !ok {
		return nil, errOtherKind
	}
	if !validKey(credential) {
		return nil, errCredential
	}
	cfg.key = sandbox.NewCredential(credential)
	return cfg, nil
}

// Requirements: the API key is required, and so is Core's public origin
// (the Runtime in the sandbox dials it); no configuration discovery.
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
