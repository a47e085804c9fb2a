package deployment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providerapi"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/providers"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/deployment"
	"berth.dev/core/secrets"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

const testTimeout = time.Minute

// directKind is a test-only direct provider that takes a credential: the
// only registered provider (docker) is a node provider, which takes none.
const directKind = "direct-test"

// fixture is a DeploymentService on a fresh database, over a registry of
// docker and the test-only direct provider.
type fixture struct {
	svc            *deployment.Service
	st             *store.Store
	key            secrets.Key
	installationID uuid.UUID
	ctx            context.Context
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	t.Parallel()
	st := storetest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	inst, err := st.ClaimInstallation(ctx, uuid.New(), "https://core.example")
	admintest.Must(t, err)
	key, _, err := secrets.NewKey()
	admintest.Must(t, err)
	reg, err := providers.NewRegistry(docker.Registration(), directRegistration())
	admintest.Must(t, err)
	svc, err := deployment.NewService(st, reg, key, inst.ID)
	admintest.Must(t, err)
	return fixture{svc: svc, st: st, key: key, installationID: inst.ID, ctx: ctx}
}

// generations counts the stored generations.
func (f fixture) generations(t *testing.T) int {
	t.Helper()
	var n int
	admintest.Must(t, f.st.Pool().QueryRow(f.ctx, "SELECT count(*) FROM deployment_generations").Scan(&n))
	return n
}

func defaultSpec() sandbox.Specification {
	return sandbox.Specification{
		Resources:   sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
		MaxActive:   4,
		MaxRetained: 0,
	}
}

func dockerCandidate() deployment.Candidate {
	return deployment.Candidate{ProviderKind: "docker", Specification: defaultSpec()}
}

func directCandidate(region, token string) deployment.Candidate {
	return deployment.Candidate{
		ProviderKind:  directKind,
		Public:        json.RawMessage(`{"region":"` + region + `"}`),
		Credential:    sandbox.NewCredential([]byte(`{"token":"` + token + `"}`)),
		Specification: defaultSpec(),
	}
}

// directRegistration registers directConfig's adapter as a direct
// provider. Its constructor is never called here.
func directRegistration() providerapi.Registration {
	return providerapi.Registration{
		Kind:                  directKind,
		Mode:                  providerapi.ModeDirect,
		ValidateSpecification: func(sandbox.Specification) error { return nil },
		ValidateResources: func(r sandbox.Resources) error {
			if r.CPUMillis > 8000 {
				return errdefs.Invalid("resources.cpu_millis", "at most 8000 for this provider")
			}
			return nil
		},
		Configuration: directAdapter{},
		Operations:    docker.Operations(),
		RuntimeInput:  providerapi.RuntimeInputPolicy{AcceptsPinnedRuntime: true},
		BuildDirect: func(context.Context, sandbox.NativeConfiguration, providerapi.DirectRequest) (sandbox.SandboxProvider, error) {
			return nil, errors.New("not constructed in these tests")
		},
	}
}

type directConfig struct {
	Region string
	token  []byte
}

func (directConfig) ProviderKind() string { return directKind }

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

// client is a real gRPC client of an admin server that serves f's
// DeploymentService on a loopback port.
type client struct {
	adminv1.DeploymentServiceClient
	token string
}

func (f fixture) serve(t *testing.T) client {
	t.Helper()
	cc, token := admintest.Serve(t, admin.Options{Deployment: deployment.NewServer(f.svc)})
	return client{DeploymentServiceClient: adminv1.NewDeploymentServiceClient(cc), token: token}
}

// authed returns ctx carrying the admin bearer token.
func (c client) authed(ctx context.Context) context.Context { return admintest.Authed(ctx, c.token) }
