package nodetls

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestTokenRoundTrip(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	text, id, hash, expires, err := NewToken(ca.Fingerprint(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^berth-enroll-v1\.[0-9a-f]{32}\.[A-Za-z0-9_-]{43}\.[0-9a-f]{64}$`).MatchString(text) {
		t.Fatalf("token text has the wrong shape")
	}
	if !expires.Equal(now.Add(time.Hour)) {
		t.Errorf("expires %s", expires)
	}
	parts := strings.Split(text, ".")
	secret, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if sum := sha256.Sum256(secret); !bytes.Equal(hash, sum[:]) || parts[1] != id {
		t.Fatal("returned id/hash do not match the token text")
	}

	tok, err := ParseToken(text)
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID() != id || tok.CAFingerprint() != ca.Fingerprint() {
		t.Errorf("parsed id %q fingerprint %q", tok.ID(), tok.CAFingerprint())
	}
	if !tok.Matches(hash) {
		t.Error("Matches(own hash) = false")
	}
	// The pinned fingerprint feeds PinnedConfig directly.
	if _, err := PinnedConfig(tok.CAFingerprint()); err != nil {
		t.Errorf("PinnedConfig(token fingerprint): %v", err)
	}

	other, _, otherHash, _, err := NewToken(ca.Fingerprint(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if other == text {
		t.Fatal("two tokens are equal")
	}
	wrong := bytes.Clone(hash)
	wrong[0] ^= 1
	for name, h := range map[string][]byte{"other token's hash": otherHash, "flipped bit": wrong, "nil": nil, "short": hash[:16], "long": append(bytes.Clone(hash), 0), "the secret itself": secret} {
		if tok.Matches(h) {
			t.Errorf("Matches(%s) = true", name)
		}
	}
	if (Token{}).Matches(hash) {
		t.Error("zero Token matches")
	}

	for name, tc := range map[string]struct {
		fp  string
		ttl time.Duration
		now time.Time
	}{
		"bare hex fingerprint": {ca.Fingerprint()[7:], time.Hour, now},
		"upper-case":           {strings.ToUpper(ca.Fingerprint()), time.Hour, now},
		"zero ttl":             {ca.Fingerprint(), 0, now},
		"negative ttl":         {ca.Fingerprint(), -time.Hour, now},
		"ttl over maximum":     {ca.Fingerprint(), MaxTokenTTL + time.Second, now},
		"zero time":            {ca.Fingerprint(), time.Hour, time.Time{}},
	} {
		if _, _, _, _, err := NewToken(tc.fp, tc.now, tc.ttl); err == nil {
			t.Errorf("NewToken %s succeeded", name)
		}
	}
}

func TestParseTokenStrict(t *testing.T) {
	ca := newTestCA(t)
	text, _, _, _, err := NewToken(ca.Fingerprint(), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := strings.Split(text, ".")
	join := func(parts ...string) string { return strings.Join(parts, ".") }
	// The secret's last character carries 4 unused bits in 43 characters;
	// setting one of them gives a non-canonical encoding of the same bytes.
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", p[2][42])
	nonCanonical := p[2][:42] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last|1])
	if last&1 == 1 {
		nonCanonical = p[2][:42] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last&^1|2])
	}
	stdAlphabet := strings.NewReplacer("-", "+", "_", "/").Replace(p[2])
	if stdAlphabet == p[2] {
		stdAlphabet = "+" + p[2][1:]
	}
	for name, bad := range map[string]string{
		"empty":                  "",
		"three fields":           join(p[0], p[1], p[2]),
		"five fields":            join(p[0], p[1], p[2], p[3], p[3]),
		"empty field":            join(p[0], p[1], p[2], p[3], ""),
		"other version":          join("berth-enroll-v2", p[1], p[2], p[3]),
		"upper-case prefix":      join(strings.ToUpper(p[0]), p[1], p[2], p[3]),
		"upper-case id":          join(p[0], strings.ToUpper(p[1])+"", p[2], p[3]) + strings.Repeat("", 0),
		"short id":               join(p[0], p[1][:31], p[2], p[3]),
		"long id":                join(p[0], p[1]+"0", p[2], p[3]),
		"non-hex id":             join(p[0], "g"+p[1][1:], p[2], p[3]),
		"short secret":           join(p[0], p[1], p[2][:42], p[3]),
		"long secret":            join(p[0], p[1], p[2]+"A", p[3]),
		"padded secret":          join(p[0], p[1], p[2]+"=", p[3]),
		"std alphabet secret":    join(p[0], p[1], stdAlphabet, p[3]),
		"non-canonical secret":   join(p[0], p[1], nonCanonical, p[3]),
		"upper-case fingerprint": join(p[0], p[1], p[2], strings.ToUpper(p[3])),
		"prefixed fingerprint":   join(p[0], p[1], p[2], "sha256:"+p[3]),
		"short fingerprint":      join(p[0], p[1], p[2], p[3][:63]),
		"leading space":          " " + text,
		"trailing newline":       text + "\n",
	} {
		if name == "upper-case id" && strings.ToUpper(p[1]) == p[1] {
			continue // all digits, nothing to upper-case
		}
		tok, err := ParseToken(bad)
		if err == nil {
			t.Errorf("%s: ParseToken accepted it as %v", name, tok)
			continue
		}
		if strings.Contains(err.Error(), p[2]) || strings.Contains(err.Error(), p[2][:16]) {
			t.Errorf("%s: error contains the secret", name)
		}
	}
	if _, err := ParseToken(text); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestTokenNeverPrintsSecret(t *testing.T) {
	ca := newTestCA(t)
	text, _, tok := newParsedToken(t, ca)
	encoded := strings.Split(text, ".")[2]
	raw, _ := base64.RawURLEncoding.DecodeString(encoded)
	forbidden := []string{
		encoded,
		encoded[:12],
		hex.EncodeToString(raw)[:16],
		strings.ToUpper(hex.EncodeToString(raw)[:16]),
		strings.Trim(fmt.Sprintf("%d", raw[:4]), "[]"), // decimal bytes
		string(raw[:8]),
	}
	type exported struct{ Tok Token }
	type hidden struct{ tok Token }
	values := map[string]any{
		"value":            tok,
		"pointer":          &tok,
		"exported field":   exported{tok},
		"unexported field": hidden{tok},
		"slice":            []Token{tok},
		"map":              map[string]Token{"t": tok},
	}
	for vname, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
			out := fmt.Sprintf(verb, v)
			for _, f := range forbidden {
				if strings.Contains(out, f) {
					t.Errorf("%s %s prints the secret: %s", vname, verb, out)
				}
			}
		}
	}
	if s := tok.String(); !strings.Contains(s, tok.ID()) || !strings.Contains(s, "<redacted>") {
		t.Errorf("String() = %q", s)
	}
	if s := fmt.Sprint(Token{}); strings.Contains(s, "redacted") {
		t.Errorf("zero Token prints %q", s)
	}
}

func TestSecretHashIsWhatNewTokenReturned(t *testing.T) {
	ca := newTestCA(t)
	_, hash, tok := newParsedToken(t, ca)
	if !bytes.Equal(tok.SecretHash(), hash) || !tok.Matches(tok.SecretHash()) {
		t.Fatal("SecretHash differs from the hash NewToken returned")
	}
	if (Token{}).SecretHash() != nil {
		t.Fatal("zero token has a hash")
	}
}

func TestReissueTokenKeepsIDWithNewSecret(t *testing.T) {
	ca := newTestCA(t)
	text, id, hash, _, err := NewToken(ca.Fingerprint(), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	again, againHash, err := ReissueToken(ca.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ParseToken(again)
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID() != id || tok.CAFingerprint() != ca.Fingerprint() {
		t.Errorf("reissued token has id %q, fingerprint %q", tok.ID(), tok.CAFingerprint())
	}
	if again == text || bytes.Equal(againHash, hash) {
		t.Fatal("reissued token kept the old secret")
	}
	if !tok.Matches(againHash) || tok.Matches(hash) {
		t.Fatal("reissued secret hash does not match the reissued text only")
	}
	for name, tc := range map[string]struct{ fp, id string }{
		"bare hex fingerprint": {ca.Fingerprint()[7:], id},
		"upper-case id":        {ca.Fingerprint(), strings.ToUpper(id)},
		"short id":             {ca.Fingerprint(), id[:30]},
		"empty id":             {ca.Fingerprint(), ""},
	} {
		if _, _, err := ReissueToken(tc.fp, tc.id); err == nil {
			t.Errorf("ReissueToken %s succeeded", name)
		}
	}
}
