package e2b_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/providers"
)

var spec = sandbox.Specification{
	Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 10 << 30},
	MaxActive: 4,
}

func registry(t *testing.T) *providers.Registry {
	t.Helper()
	reg, err := providers.Default()
	if err != nil {
		t.Fatalf("default registry: %v", err)
	}
	return reg
}

// TestRegistrationSelectorFixtures: the registry's Normalize (the path of
// berthctl and the admin API) gives every shared selector fixture the
// same verdict as the adapter, through the registered configuration.
func TestRegistrationSelectorFixtures(t *testing.T) {
	reg := registry(t)
	for _, c := range e2btest.SelectorFixtures() {
		t.Run(c.Name, func(t *testing.T) {
			enc, err := reg.Normalize(e2b.Kind, input(c))
			checkVerdict(t, c, enc.Public, err)
			if err == nil {
				d, err := reg.Describe(e2b.Kind, enc)
				if err != nil || string(d.Public) != c.Normalized || !d.HasCredential || strings.Contains(sprint(d), "hunter2") {
					t.Fatalf("describe = %+v, %v", d, err)
				}
			}
		})
	}
}

// TestRegistrationDeclares: e2b is in the one registration table as a
// direct provider with a required key and public origin, its
// declaration the adapter's, and the template's inputs as its artifacts.
func TestRegistrationDeclares(t *testing.T) {
	r, err := registry(t).Lookup(e2b.Kind)
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.ValidateRegistration(r); err != nil {
		t.Fatal(err)
	}
	req := r.Configuration.Requirements()
	if r.Mode != providers.ModeDirect || req.Credential != sandbox.Required || req.PublicOrigin != sandbox.Required ||
		!r.Operations.Equal(e2b.Operations()) || !r.Suspension.IsZero() || len(r.Artifacts) != 2 || r.Artifacts[1].Path != "e2b/e2b.dockerfile" {
		t.Fatalf("registration = %+v", r)
	}
}

// directRequest is what Core passes for a generation over f with key.
func directRequest(t *testing.T, f *e2btest.Fixture, key string) providers.DirectRequest {
	enc, err := registry(t).Normalize(e2b.Kind, sandbox.ConfigurationInput{Public: f.Public(), Credential: e2btest.Credential(key)})
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	return providers.DirectRequest{
		Deployment:     sandbox.EncodedConfiguration{Public: enc.Public, Observations: enc.Observations},
		Credential:     enc.Secret,
		Specification:  spec,
		InstallationID: uuid.NewString(),
		Generation:     1,
		Paths:          providers.ProcessPaths{Root: "/usr/lib/berth", State: state},
	}
}

// TestBuildDirect: providers.BuildDirect composes the key into the
// stored selectors and builds a complete DirectBuilt (provider, probe,
// close, fence) that sends nothing at construction; the fingerprint
// names the endpoint, never the key; the state directory is private;
// the probe reads with the key and reports fixed codes.
func TestBuildDirect(t *testing.T) {
	f := e2btest.Start(t)
	req := directRequest(t, f, f.Key)
	built, err := registry(t).BuildDirect(context.Background(), e2b.Kind, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Requests()) != 0 {
		t.Fatalf("construction sent %d requests", len(f.Requests()))
	}
	if built.BackendFingerprint != "e2b:"+f.URL || strings.Contains(built.BackendFingerprint, f.Key) || built.Fence == nil {
		t.Fatalf("built = %+v", built)
	}
	st, err := os.Stat(filepath.Join(req.Paths.State, e2b.StateSubdirectory, "creates"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v, %v", st, err)
	}
	if err := built.Probe(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	calls := f.Calls()
	if len(calls) != 1 || calls[0].Name != "list" {
		t.Fatalf("probe calls = %v", calls)
	}

	wrong := directRequest(t, f, "e2b_not_a_key")
	bad, err := registry(t).BuildDirect(context.Background(), e2b.Kind, wrong)
	if err != nil {
		t.Fatal(err)
	}
	if code := sandbox.ProbeCode(bad.Probe(context.Background())); code != e2b.ProbeCredentialRejected {
		t.Fatalf("probe with a wrong key: %q", code)
	}
	down := directRequest(t, f, f.Key)
	var pub map[string]any
	_ = json.Unmarshal(down.Deployment.Public, &pub)
	pub["api_url"] = "http://127.0.0.1:1"
	down.Deployment.Public, _ = json.Marshal(pub)
	unreachable, err := registry(t).BuildDirect(context.Background(), e2b.Kind, down)
	if err != nil {
		t.Fatal(err)
	}
	if code := sandbox.ProbeCode(unreachable.Probe(context.Background())); code != e2b.ProbeVendorUnreachable {
		t.Fatalf("probe of a closed port: %q", code)
	}

	if err := built.Close(); err != nil {
		t.Fatal(err)
	}
	if code := sandbox.ProbeCode(built.Probe(context.Background())); code != e2b.ProbeFenced {
		t.Fatalf("probe after close: %q", code)
	}
	if _, err := built.Provider.GetInfo(context.Background(), sandboxRef()); err == nil {
		t.Fatal("a closed adapter answered")
	}
}
