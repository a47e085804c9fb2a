package deploymenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"
	"berth.dev/sandbox/providerapi"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/providers"

	"berth.dev/core/deployment"
	"berth.dev/core/secrets"
	"berth.dev/core/store/storetest"
)

// DirectKind is a test-only direct provider that takes a credential: the
// only registered provider (docker) is a node provider, which takes none.
const DirectKind = "direct-test"

// Fixture is a DeploymentService on a fresh database, over a registry of
// docker and the test-only direct provider.
type Fixture struct {
	Svc            *deployment.Service
	St             *storetest.Owned
	Key            secrets.Key
	InstallationID uuid.UUID
	Ctx            context.Context
}

// New returns a Fixture for a parallel test.
func New(t *testing.T) Fixture {
	t.Helper()
	return NewWith(t, deployment.Options{})
}

// NewWith is New with the Service's options (a gate, a node observer, a
// bus).
func NewWith(t *testing.T, opts deployment.Options) Fixture {
	t.Helper()
	st, ctx := storetest.Parallel(t)
	inst, err := st.ClaimInstallation(ctx, uuid.New(), "https://core.example")
	errdefstest.Must(t, err)
	key, _, err := secrets.NewKey()
	errdefstest.Must(t, err)
	reg, err := providers.NewRegistry(docker.Registration(), DirectRegistration())
	errdefstest.Must(t, err)
	owned := storetest.Owner(t, st)
	svc, err := deployment.NewService(owned, reg, key, inst.ID, opts)
	errdefstest.Must(t, err)
	return Fixture{Svc: svc, St: owned, Key: key, InstallationID: inst.ID, Ctx: ctx}
}

// Generations counts the stored generations.
func (f Fixture) Generations(t *testing.T) int {
	t.Helper()
	var n int
	errdefstest.Must(t, f.St.Pool().QueryRow(f.Ctx, "SELECT count(*) FROM deployment_generations").Scan(&n))
	return n
}

// WantGenerations fails the test unless want deployment generations are
// stored; after says after what, for the failure.
func (f Fixture) WantGenerations(t *testing.T, want int, after string) {
	t.Helper()
	if n := f.Generations(t); n != want {
		t.Fatalf("%d generations stored %s, want %d", n, after, want)
	}
}

// DefaultSpec is a specification every test provider accepts.
func DefaultSpec() sandbox.Specification {
	return sandbox.Specification{
		Resources:   sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
		MaxActive:   4,
		MaxRetained: 0,
	}
}

// DockerCandidate is a docker selection with DefaultSpec.
func DockerCandidate() deployment.Candidate {
	return deployment.Candidate{ProviderKind: "docker", Specification: DefaultSpec()}
}

// DirectCandidate is a selection of the test-only direct provider.
func DirectCandidate(region, token string) deployment.Candidate {
	return deployment.Candidate{
		ProviderKind:  DirectKind,
		Public:        json.RawMessage(`{"region":"` + region + `"}`),
		Credential:    sandbox.NewCredential([]byte(`{"token":"` + token + `"}`)),
		Specification: DefaultSpec(),
	}
}

// DirectRegistration registers directConfig's adapter as a direct
// provider. Its constructor is never called here.
func DirectRegistration() providerapi.Registration {
	return providerapi.Registration{
		Kind:                  DirectKind,
		Mode:                  providerapi.ModeDirect,
		ValidateSpecification: func(sandbox.Specification) error { return nil },
		ValidateResources: func(r sandbox.Resources) error {
			if r.CPUMillis > 8000 {
				return errdefs.Invalid("resources.cpu_millis", "at most 8000 for this provider")
			}
			return nil
		},
		Configuration: directAdapter{},
		Operations:    sandbox.WithoutCheckpoints(docker.Operations(), "test_direct_no_checkpoints"),
		RuntimeInput:  providerapi.RuntimeInputPolicy{AcceptsPinnedRuntime: true},
		BuildDirect: func(context.Context, sandbox.NativeConfiguration, providerapi.DirectRequest) (providerapi.DirectBuilt, error) {
			return providerapi.DirectBuilt{}, errors.New("not constructed in these tests")
		},
	}
}

type directConfig struct {
	Region string
	token  []byte
}

func (directConfig) ProviderKind() string { return DirectKind }

// directAdapter: public {"region": non-empty string}, credential
// {"token": non-empty string}, required.
type directAdapter struct{}

func (directAdapter) DecodeInput(in sandbox.ConfigurationInput) (sandbox.NativeConfiguration, error) {
	var pub struct {
		Region string `json:"region"`
	}
	dec := json.NewDecoder(bytes.NewReader(in.Public))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pub); err != nil || pub.Region == "" {
		return nil, errdefs.Invalid("configuration.public.region", "required")
	}
	var cred struct {
		Token string `json:"token"`
	}
	if in.Credential.Len() == 0 {
		return nil, errdefs.Invalid("configuration.credential", "required")
	}
	dec = json.NewDecoder(bytes.NewReader(in.Credential.Reveal()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cred); err != nil || cred.Token == "" {
		return nil, errdefs.Invalid("configuration.credential.token", "required")
	}
	return directConfig{Region: pub.Region, token: []byte(cred.Token)}, nil
}

func (directAdapter) Encode(cfg sandbox.NativeConfiguration) (sandbox.EncodedConfiguration, error) {
	c, ok := cfg.(directConfig)
	if !ok {
		return sandbox.EncodedConfiguration{}, errdefs.Invalid("configuration", "belongs to another provider")
	}
	pub, err := json.Marshal(map[string]string{"region": c.Region})
	if err != nil {
		return sandbox.EncodedConfiguration{}, err
	}
	return sandbox.EncodedConfiguration{Public: pub, Observations: json.RawMessage(`{"zone_count":3}`), Secret: sandbox.NewCredential(c.token)}, nil
}

func (directAdapter) Decode(stored sandbox.EncodedConfiguration) (sandbox.NativeConfiguration, error) {
	var pub struct {
		Region string `json:"region"`
	}
	if err := json.Unmarshal(stored.Public, &pub); err != nil || pub.Region == "" {
		return nil, errdefs.Invalid("configuration.public.region", "required")
	}
	return directConfig{Region: pub.Region, token: bytes.Clone(stored.Secret.Reveal())}, nil
}

func (directAdapter) Normalize(cfg sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	c, ok := cfg.(directConfig)
	if !ok {
		return nil, errdefs.Invalid("configuration", "belongs to another provider")
	}
	return directConfig{Region: c.Region, token: bytes.Clone(c.token)}, nil
}

func (a directAdapter) ResolveChange(current sandbox.NativeConfiguration, change sandbox.ConfigurationInput) (sandbox.NativeConfiguration, error) {
	return a.DecodeInput(change)
}

func (directAdapter) Equal(x, y sandbox.NativeConfiguration) bool {
	a, ok1 := x.(directConfig)
	b, ok2 := y.(directConfig)
	return ok1 && ok2 && a.Region == b.Region
}

func (directAdapter) WithCredential(cfg sandbox.NativeConfiguration, credential []byte) (sandbox.NativeConfiguration, error) {
	c, ok := cfg.(directConfig)
	if !ok {
		return nil, errdefs.Invalid("configuration", "belongs to another provider")
	}
	return directConfig{Region: c.Region, token: bytes.Clone(credential)}, nil
}

func (directAdapter) Requirements() sandbox.ConfigurationRequirements {
	return sandbox.ConfigurationRequirements{
		Credential:   sandbox.Required,
		PublicOrigin: sandbox.NotRequired,
		Discovery:    providercontract.Unsupported("test_no_discovery"),
	}
}

func (directAdapter) DiscoverConfiguration(context.Context, sandbox.DiscoveryQuery) (sandbox.Catalog, error) {
	return sandbox.Catalog{}, &providercontract.UnsupportedError{Operation: "DiscoverConfiguration", Code: "test_no_discovery"}
}
