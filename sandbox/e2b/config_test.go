package e2b_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/errdefs"
)

const validCredential = `{"api_key":"e2b_hunter2"}`

// input is fixture c as a configuration request.
func input(c e2btest.SelectorFixture) sandbox.ConfigurationInput {
	cred := c.Credential
	if cred == "" {
		cred = validCredential
	}
	return sandbox.ConfigurationInput{Public: json.RawMessage(c.Public), Credential: sandbox.NewCredential([]byte(cred))}
}

// checkVerdict checks one entry point's answer to fixture c: the same
// refusal field, no echoed value, the same stored public object.
func checkVerdict(t *testing.T, c e2btest.SelectorFixture, public json.RawMessage, err error) {
	t.Helper()
	if c.Field == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if !bytes.Equal(public, []byte(c.Normalized)) {
			t.Fatalf("stored public = %s, want %s", public, c.Normalized)
		}
		return
	}
	field, ok := errdefs.Field(err)
	if !ok || !errdefs.IsInvalid(err) || field != c.Field {
		t.Fatalf("err = %v, want invalid %s", err, c.Field)
	}
	for _, secret := range []string{"hunter2", "10.0.0.1", "Berth-Runtime", "api.e2b.app/v2"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error echoes the input: %v", err)
		}
	}
}

// TestSelectorFixtures: the adapter's configuration adapter gives every
// shared selector fixture its verdict (DecodeInput, then Encode), and an
// encoded configuration decodes back to an equal one.
func TestSelectorFixtures(t *testing.T) {
	a := e2b.Configuration()
	for _, c := range e2btest.SelectorFixtures() {
		t.Run(c.Name, func(t *testing.T) {
			n, err := a.DecodeInput(input(c))
			var public json.RawMessage
			if err == nil {
				enc, eerr := a.Encode(n)
				if eerr != nil {
					t.Fatalf("encode: %v", eerr)
				}
				public = enc.Public
				if string(enc.Secret.Reveal()) != "e2b_hunter2" {
					t.Fatalf("secret bytes are not the key")
				}
				back, derr := a.Decode(sandbox.EncodedConfiguration{Public: enc.Public})
				if derr != nil || !a.Equal(back, n) {
					t.Fatalf("decode of the stored form: %v", derr)
				}
			}
			checkVerdict(t, c, public, err)
		})
	}
}

// TestConfigurationInheritsAndHidesTheKey: a change inherits omitted
// fields and the key; Equal ignores the key; no printer shows it.
func TestConfigurationInheritsAndHidesTheKey(t *testing.T) {
	a := e2b.Configuration()
	cur, err := a.DecodeInput(sandbox.ConfigurationInput{Public: json.RawMessage(`{"template":"abc","lease_seconds":600}`),
		Credential: sandbox.NewCredential([]byte(validCredential))})
	if err != nil {
		t.Fatal(err)
	}
	next, err := a.ResolveChange(cur, sandbox.ConfigurationInput{Public: json.RawMessage(`{"template":"def"}`)})
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := a.Encode(next)
	if string(enc.Public) != `{"api_url":"https://api.e2b.app","template":"def","lease_seconds":600}` ||
		string(enc.Secret.Reveal()) != "e2b_hunter2" {
		t.Fatalf("change = %s", enc.Public)
	}
	rekeyed, err := a.WithCredential(cur, []byte("e2b_other"))
	if err != nil || !a.Equal(rekeyed, cur) {
		t.Fatalf("WithCredential: %v", err)
	}
	for _, s := range []string{sprint(cur), sprint(enc)} {
		if strings.Contains(s, "hunter2") {
			t.Fatalf("printed key: %s", s)
		}
	}
	if _, err := a.WithCredential(cur, []byte("bad key")); !errdefs.IsInvalid(err) {
		t.Fatalf("WithCredential of a malformed key: %v", err)
	}
}
