package admin

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"berth.dev/sandbox/errdefs"
)

func newTestPageTokens(t *testing.T, fill byte) *PageTokens {
	t.Helper()
	p, err := NewPageTokens(bytes.Repeat([]byte{fill}, MinPageTokenKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPageTokenRoundTrip(t *testing.T) {
	p := newTestPageTokens(t, 1)
	for _, cursor := range [][]byte{{0}, []byte("2026-01-01T00:00:00Z/" + u1), bytes.Repeat([]byte{0xff}, MaxCursorBytes)} {
		token := p.Encode(cursor, "ListTurns", "sessions/"+u1)
		if strings.Contains(token, u1) {
			t.Fatal("the token shows its cursor in the clear")
		}
		got, err := p.Decode("page_token", token, "ListTurns", "sessions/"+u1)
		if err != nil || !bytes.Equal(got, cursor) {
			t.Fatalf("round trip: %v", err)
		}
	}
}

func TestPageTokenEmpty(t *testing.T) {
	p := newTestPageTokens(t, 1)
	if p.Encode(nil, "ListNodes") != "" {
		t.Fatal("no cursor must give the empty token")
	}
	got, err := p.Decode("page_token", "", "ListNodes")
	if err != nil || got != nil {
		t.Fatalf("empty token: %v %v", got, err)
	}
}

func TestPageTokenRefusals(t *testing.T) {
	p := newTestPageTokens(t, 1)
	cursor := []byte("cursor-1")
	token := p.Encode(cursor, "ListSessions", "show_deleted=false")
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	cases := map[string]struct {
		p     *PageTokens
		token string
		scope []string
	}{
		"other key":            {newTestPageTokens(t, 2), token, []string{"ListSessions", "show_deleted=false"}},
		"other method":         {p, token, []string{"ListNodes", "show_deleted=false"}},
		"other parameter":      {p, token, []string{"ListSessions", "show_deleted=true"}},
		"scope split":          {p, token, []string{"ListSessionsshow_deleted=false"}},
		"scope missing":        {p, token, []string{"ListSessions"}},
		"cursor changed":       {p, flip(1), []string{"ListSessions", "show_deleted=false"}},
		"mac changed":          {p, flip(len(raw) - 1), []string{"ListSessions", "show_deleted=false"}},
		"version changed":      {p, flip(0), []string{"ListSessions", "show_deleted=false"}},
		"truncated":            {p, token[:len(token)-2], []string{"ListSessions", "show_deleted=false"}},
		"padded":               {p, token + "=", []string{"ListSessions", "show_deleted=false"}},
		"standard base64":      {p, base64.StdEncoding.EncodeToString(raw), []string{"ListSessions", "show_deleted=false"}},
		"not base64":           {p, "!!!!", []string{"ListSessions"}},
		"mac only":             {p, base64.RawURLEncoding.EncodeToString(raw[len(raw)-32:]), []string{"ListSessions"}},
		"too long":             {p, strings.Repeat("A", 2000), []string{"ListSessions"}},
		"forged plain cursor":  {p, base64.RawURLEncoding.EncodeToString(append([]byte{1}, cursor...)), []string{"ListSessions", "show_deleted=false"}},
		"forged unsigned + 32": {p, base64.RawURLEncoding.EncodeToString(append(append([]byte{1}, cursor...), make([]byte, 32)...)), []string{"ListSessions", "show_deleted=false"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.p.Decode("page_token", tc.token, tc.scope...)
			if f, ok := errdefs.Field(err); !ok || f != "page_token" || got != nil {
				t.Fatalf("accepted or wrong error: %v", err)
			}
			if strings.Contains(err.Error(), tc.token) {
				t.Fatal("the error echoes the token")
			}
		})
	}
}

func TestNewPageTokensKey(t *testing.T) {
	if _, err := NewPageTokens(make([]byte, MinPageTokenKeyBytes-1)); err == nil {
		t.Fatal("short key accepted")
	}
	key := bytes.Repeat([]byte{7}, MinPageTokenKeyBytes)
	p, err := NewPageTokens(key)
	if err != nil {
		t.Fatal(err)
	}
	token := p.Encode([]byte("c"), "ListNodes")
	key[0] = 8 // the caller's buffer is not the key
	if _, err := p.Decode("page_token", token, "ListNodes"); err != nil {
		t.Fatal("key was not copied")
	}
}

func TestPageTokenEncodePanicsOnOversizedCursor(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	newTestPageTokens(t, 1).Encode(make([]byte, MaxCursorBytes+1))
}
