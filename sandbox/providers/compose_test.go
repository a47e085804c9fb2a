package providers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refadapter"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/providers"
	"berth.dev/sandbox/redacttest"
)

// testKey is the credential of these tests: it must never be printed,
// stored with the selectors or seen by Decode.
const testKey = "tk_0123456789_compose_secret"

// keyedConfig is keyedAdapter's composed configuration: the reference
// adapter's (empty) selectors and a key, held as a sandbox.Credential.
type keyedConfig struct {
	sandbox.NativeConfiguration
	key sandbox.Credential
}

// keyedAdapter requires a credential: the reference adapter's node
// configuration with Requirements, Decode and WithCredential of a direct
// provider, recording what it was given.
type keyedAdapter struct {
	nodeconfig.Adapter
	rec *keyedRecord
}

type keyedRecord struct {
	decodedSecrets int // Decode calls that saw a secret
	composed       int // WithCredential calls
	refuse         error
	otherKind      bool // WithCredential answers a configuration of another kind
}

func (a keyedAdapter) Requirements() sandbox.ConfigurationRequirements {
	r := a.Adapter.Requirements()
	r.Credential = sandbox.Required
	return r
}

func (a keyedAdapter) Decode(stored sandbox.EncodedConfiguration) (sandbox.NativeConfiguration, error) {
	if stored.Secret.Len() > 0 {
		a.rec.decodedSecrets++
	}
	cfg, err := a.Adapter.Decode(sandbox.EncodedConfiguration{Public: stored.Public, Observations: stored.Observations})
	if err != nil {
		return nil, err
	}
	return keyedConfig{NativeConfiguration: cfg, key: stored.Secret}, nil
}

func (a keyedAdapter) WithCredential(n sandbox.NativeConfiguration, credential []byte) (sandbox.NativeConfiguration, error) {
	a.rec.composed++
	if a.rec.refuse != nil {
		return nil, a.rec.refuse
	}
	cfg, ok := n.(keyedConfig)
	if !ok || len(credential) == 0 {
		return nil, errdefs.Invalid("configuration.credential", "required")
	}
	cfg.key = sandbox.NewCredential(credential)
	if a.rec.otherKind {
		return otherKind{}, nil
	}
	return cfg, nil
}

type otherKind struct{}

func (otherKind) ProviderKind() string { return "other" }

// keyed is a credential-required direct registration over the reference
// adapter whose constructor records the configuration and request it got.
type keyed struct {
	rec   keyedRecord
	calls int
	cfg   sandbox.NativeConfiguration
	req   providers.DirectRequest
}

func (k *keyed) registry(t *testing.T) *providers.Registry {
	t.Helper()
	r := refadapter.Registration()
	r.Mode = providers.ModeDirect
	r.BuildLocal = nil
	r.Artifacts = nil
	r.Configuration = keyedAdapter{Adapter: nodeconfig.Adapter{Kind: refadapter.Kind}, rec: &k.rec}
	r.BuildDirect = func(_ context.Context, cfg sandbox.NativeConfiguration, req providers.DirectRequest) (providers.DirectBuilt, error) {
		k.calls++
		k.cfg, k.req = cfg, req
		return providers.DirectBuilt{
			Provider: refadapter.New("", "i", nil),
			Probe:    func(context.Context) error { return nil },
			Close:    func() error { return nil },
			Fence:    &sandbox.CallFence{},
		}, nil
	}
	reg, err := providers.NewRegistry(r)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func keyedRequest() providers.DirectRequest {
	req := directRequest()
	req.Credential = sandbox.NewCredential([]byte(testKey))
	return req
}

// TestBuildDirectRefusesARequiredCredentialMissing: a credential-required
// registration built without a credential is refused with the fixed
// reason credential_required, before Decode, WithCredential or the
// constructor run.
func TestBuildDirectRefusesARequiredCredentialMissing(t *testing.T) {
	k := &keyed{}
	req := keyedRequest()
	req.Credential = sandbox.Credential{}
	_, err := k.registry(t).BuildDirect(context.Background(), refadapter.Kind, req)
	ref, ok := errdefs.AsRefusal(err)
	if !ok || ref.Reason != "credential_required" || !errdefs.IsFailedPrecondition(err) || !errors.Is(err, providers.ErrCredentialRequired) {
		t.Fatalf("err = %v, want the credential_required refusal", err)
	}
	if k.calls != 0 || k.rec.composed != 0 {
		t.Fatalf("constructor ran %d times, WithCredential %d times", k.calls, k.rec.composed)
	}
}

// TestBuildDirectComposesTheCredentialOnce: with a credential the build
// reaches the constructor with the configuration WithCredential composed
// (called once), Decode never sees a secret, and the constructor's
// request carries neither the credential nor a stored secret.
func TestBuildDirectComposesTheCredentialOnce(t *testing.T) {
	k := &keyed{}
	if _, err := k.registry(t).BuildDirect(context.Background(), refadapter.Kind, keyedRequest()); err != nil {
		t.Fatal(err)
	}
	if k.calls != 1 || k.rec.composed != 1 || k.rec.decodedSecrets != 0 {
		t.Fatalf("constructor %d, WithCredential %d, Decode with a secret %d; want 1, 1, 0", k.calls, k.rec.composed, k.rec.decodedSecrets)
	}
	cfg, ok := k.cfg.(keyedConfig)
	if !ok || string(cfg.key.Reveal()) != testKey {
		t.Fatalf("the constructor got %T without the composed key", k.cfg)
	}
	if k.req.Credential.Len() != 0 || k.req.Deployment.Secret.Len() != 0 {
		t.Fatal("the constructor's request still carries the credential")
	}
	if k.req.Generation != 3 || k.req.Paths.Root != "/usr/lib/berth" {
		t.Fatalf("the constructor's request lost its fields: %+v", k.req)
	}
}

// TestBuildDirectRefusesASecretInTheStoredConfiguration: the secret never
// travels in the stored configuration; a request whose Deployment carries
// one is invalid before anything is decoded.
func TestBuildDirectRefusesASecretInTheStoredConfiguration(t *testing.T) {
	k := &keyed{}
	req := keyedRequest()
	req.Deployment.Secret = sandbox.NewCredential([]byte(testKey))
	_, err := k.registry(t).BuildDirect(context.Background(), refadapter.Kind, req)
	if f, _ := errdefs.Field(err); !errdefs.IsInvalid(err) || f != "deployment.secret" {
		t.Fatalf("err = %v, want invalid deployment.secret", err)
	}
	if k.calls != 0 || k.rec.composed != 0 || k.rec.decodedSecrets != 0 {
		t.Fatal("something ran for a request with a stored secret")
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatal("the refusal quotes the secret")
	}
}

// TestBuildDirectPassesACompositionErrorOn: WithCredential's refusal is
// the build's error and the constructor never runs.
func TestBuildDirectPassesACompositionErrorOn(t *testing.T) {
	k := &keyed{}
	k.rec.refuse = errdefs.Invalid("configuration.credential", "malformed")
	_, err := k.registry(t).BuildDirect(context.Background(), refadapter.Kind, keyedRequest())
	if !errors.Is(err, k.rec.refuse) {
		t.Fatalf("err = %v, want the adapter's refusal", err)
	}
	if k.calls != 0 {
		t.Fatal("the constructor ran after a failed composition")
	}
}

// TestBuildDirectRejectsAComposedConfigurationOfAnotherKind: what
// WithCredential returns must be the registration's kind, else a
// contract error and no construction.
func TestBuildDirectRejectsAComposedConfigurationOfAnotherKind(t *testing.T) {
	k := &keyed{}
	k.rec.otherKind = true
	_, err := k.registry(t).BuildDirect(context.Background(), refadapter.Kind, keyedRequest())
	var ce *providercontract.ContractError
	if !errors.As(err, &ce) || ce.Code != providercontract.CodeConfigurationKind {
		t.Fatalf("err = %v, want a configuration kind contract error", err)
	}
	if k.calls != 0 {
		t.Fatal("the constructor ran")
	}
}

// TestBuildDirectRefusesACredentialItDoesNotTake: a registration that
// takes no credential is given none; one given is invalid before
// construction, and without one WithCredential (unsupported there) is
// never called.
func TestBuildDirectRefusesACredentialItDoesNotTake(t *testing.T) {
	d := &directBuild{}
	d.built = d.complete
	req := directRequest()
	req.Credential = sandbox.NewCredential([]byte(testKey))
	_, err := d.registry(t).BuildDirect(context.Background(), refadapter.Kind, req)
	if f, _ := errdefs.Field(err); !errdefs.IsInvalid(err) || f != "credential" {
		t.Fatalf("err = %v, want invalid credential", err)
	}
	if d.calls != 0 {
		t.Fatal("the constructor ran")
	}
	if _, err := d.registry(t).BuildDirect(context.Background(), refadapter.Kind, directRequest()); err != nil {
		t.Fatalf("no credential for a provider without one: %v", err)
	}
}

// TestDirectRequestNeverPrintsItsCredential: a DirectRequest holding the
// opened credential, and the composed configuration the constructor got,
// print no byte of it with any fmt verb or slog handler.
func TestDirectRequestNeverPrintsItsCredential(t *testing.T) {
	k := &keyed{}
	req := keyedRequest()
	redacttest.Check(t, req, []byte(testKey))
	if _, err := k.registry(t).BuildDirect(context.Background(), refadapter.Kind, req); err != nil {
		t.Fatal(err)
	}
	redacttest.Check(t, k.cfg, []byte(testKey))
	if out, _ := json.Marshal(req); strings.Contains(string(out), testKey) {
		t.Fatalf("json shows the credential: %s", out)
	}
	if out := fmt.Sprintf("%+v", req); strings.Contains(out, testKey) {
		t.Fatalf("%%+v shows the credential: %s", out)
	}
}
