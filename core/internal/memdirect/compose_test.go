package memdirect_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
	"berth.dev/sandbox/redacttest"

	"berth.dev/core/internal/memdirect"
)

func registry(t *testing.T, v *memdirect.Vendor) *providers.Registry {
	t.Helper()
	reg, err := providers.NewRegistry(memdirect.Registration(v))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestBuildWithoutCredentialIsRefused: memdirect requires a credential;
// built from its stored selectors with none, it is refused with the fixed
// reason credential_required and the vendor is never asked (the
// constructor, whose first act is a vendor call, did not run).
func TestBuildWithoutCredentialIsRefused(t *testing.T) {
	v := vendor()
	reg := registry(t, v)
	req := directRequest(t, reg, uuid.NewString(), keyA)
	req.Credential = sandbox.Credential{}
	_, err := reg.BuildDirect(context.Background(), memdirect.Kind, req)
	ref, ok := errdefs.AsRefusal(err)
	if !ok || ref.Reason != "credential_required" || !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("err = %v, want the credential_required refusal", err)
	}
	wantCalls(t, v)
}

// TestBuildComposesTheOpenedCredential: the same stored selectors built
// with the opened credential reach the constructor with that key (the
// vendor's whoami answers its team, named in the fingerprint); with
// another team's key they reach that team. A retained generation thus
// meets the current key only through WithCredential, its selectors
// unchanged.
func TestBuildComposesTheOpenedCredential(t *testing.T) {
	v := vendor()
	reg := registry(t, v)
	inst := uuid.NewString()
	req := directRequest(t, reg, inst, keyA)
	a, err := reg.BuildDirect(context.Background(), memdirect.Kind, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	_, keyOfB := stored(encoded(t, reg, keyB))
	req.Credential = keyOfB
	b, err := reg.BuildDirect(context.Background(), memdirect.Kind, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if !strings.HasSuffix(a.BackendFingerprint, ":team:team-a") || !strings.HasSuffix(b.BackendFingerprint, ":team:team-b") {
		t.Fatalf("fingerprints %q, %q: the constructor did not get the composed key", a.BackendFingerprint, b.BackendFingerprint)
	}
	if err := a.Probe(ctxFor(t)); err != nil {
		t.Fatalf("probe: %v", err)
	}
}

// TestStoredConfigurationNeverHoldsTheKey: what the store keeps in the
// clear (the public selectors and observations) holds no byte of the
// key, the key is only the secret the store seals, and a stored
// configuration that still carries it is refused before the vendor is
// asked anything.
func TestStoredConfigurationNeverHoldsTheKey(t *testing.T) {
	v := vendor()
	reg := registry(t, v)
	enc := encoded(t, reg, keyA)
	for name, b := range map[string][]byte{"public": enc.Public, "observations": enc.Observations} {
		if bytes.Contains(b, []byte(keyA)) || bytes.Contains(b, []byte("api_key")) {
			t.Fatalf("the stored %s holds the credential: %s", name, b)
		}
	}
	if string(enc.Secret.Reveal()) != keyA {
		t.Fatal("the key is not the sealed secret")
	}
	req := directRequest(t, reg, uuid.NewString(), keyA)
	req.Deployment.Secret = enc.Secret
	_, err := reg.BuildDirect(context.Background(), memdirect.Kind, req)
	if f, _ := errdefs.Field(err); !errdefs.IsInvalid(err) || f != "deployment.secret" {
		t.Fatalf("err = %v, want invalid deployment.secret", err)
	}
	noSecret(t, "stored secret", err)
	wantCalls(t, v)
}

// TestNothingPrintsTheKey: the request Core builds (its opened
// credential), the composed configuration and the built adapter print
// no byte of the key with any fmt verb or slog handler.
func TestNothingPrintsTheKey(t *testing.T) {
	v := vendor()
	reg := registry(t, v)
	req := directRequest(t, reg, uuid.NewString(), keyA)
	redacttest.Check(t, req, []byte(keyA))
	redacttest.Check(t, decoded(t, v, keyA), []byte(keyA))
	built, err := reg.BuildDirect(context.Background(), memdirect.Kind, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = built.Close() })
	redacttest.Check(t, built.Provider, []byte(keyA))
	if strings.Contains(built.BackendFingerprint, keyA) {
		t.Fatal("the fingerprint shows the key")
	}
}
