package projects_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/redacttest"

	"berth.dev/core/projects"
)

// TestKeyTokenForm: a new token has the fixed form and length, parses to
// its own id, and its digest is the SHA-256 of its text; anything off the
// form does not parse.
func TestKeyTokenForm(t *testing.T) {
	tok, id, digest, err := projects.NewKeyToken()
	if err != nil {
		t.Fatal(err)
	}
	s := tok.Reveal()
	if len(s) != projects.KeyTokenLen || !strings.HasPrefix(s, projects.KeyPrefix) || strings.Count(s, ".") != 2 {
		t.Fatalf("token form: %d characters", len(s))
	}
	got, ok := projects.ParseKeyToken(s)
	if !ok || got != id {
		t.Fatalf("parse: %v %v, want %v", got, ok, id)
	}
	if projects.KeyDigest(s) != digest {
		t.Fatal("digest is not the token's SHA-256")
	}
	other, _, _, err := projects.NewKeyToken()
	if err != nil || other.Reveal() == s {
		t.Fatal("two tokens are equal")
	}
	bad := []string{
		"",
		projects.KeyPrefix,
		s[:len(s)-1],
		s + "A",
		strings.Replace(s, projects.KeyPrefix, "berth-key-v2.", 1),
		strings.Replace(s, projects.KeyPrefix, "berth-admin-v1", 1),
		s[:len(projects.KeyPrefix)+22] + "_" + s[len(projects.KeyPrefix)+23:], // no dot
		s[:len(projects.KeyPrefix)] + "!" + s[len(projects.KeyPrefix)+1:],     // not base64url
		s[:len(s)-1] + "=", // padding
		s[:len(s)-1] + "B", // non-canonical last character (strict decoding)
		projects.KeyPrefix + strings.Repeat("A", 22) + "." + strings.Repeat("A", 43), // the nil id
		strings.Repeat("x", 10000),
	}
	for _, b := range bad {
		if _, ok := projects.ParseKeyToken(b); ok && b != s {
			t.Errorf("parsed %q", b)
		}
	}
}

// TestKeyTokenNeverPrints: the token never shows through fmt or slog.
func TestKeyTokenNeverPrints(t *testing.T) {
	tok, _, _, err := projects.NewKeyToken()
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte(tok.Reveal()[len(projects.KeyPrefix):])
	redacttest.Check(t, tok, secret)
}

// FuzzParseKeyToken: parsing never panics, accepts only the exact form
// and returns the id the token carries.
func FuzzParseKeyToken(f *testing.F) {
	tok, _, _, err := projects.NewKeyToken()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok.Reveal())
	f.Add("berth-admin-v1.AAAA")
	f.Add(projects.KeyPrefix + "..")
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := projects.ParseKeyToken(s)
		if !ok {
			return
		}
		if len(s) != projects.KeyTokenLen || !strings.HasPrefix(s, projects.KeyPrefix) || id == uuid.Nil {
			t.Fatalf("accepted %q", s)
		}
		if s[len(projects.KeyPrefix)+22] != '.' {
			t.Fatalf("accepted %q without its dot", s)
		}
	})
}
