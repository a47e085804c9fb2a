package admin

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

func TestNewAdminToken(t *testing.T) {
	form := regexp.MustCompile(`^berth-admin-v1\.[A-Za-z0-9_-]{43}$`)
	seen := map[string]bool{}
	for range 8 {
		token, digest, err := NewAdminToken()
		if err != nil {
			t.Fatal(err)
		}
		if !form.MatchString(token) {
			t.Fatal("token does not have the admin token form")
		}
		secret, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, TokenPrefix))
		if err != nil || len(secret) != 32 {
			t.Fatalf("secret is not 32 bytes of base64url (%d, %v)", len(secret), err)
		}
		want := sha256.Sum256([]byte(token))
		if string(digest) != string(want[:]) || string(TokenDigest(token)) != string(want[:]) {
			t.Fatal("digest is not the SHA-256 of the token text")
		}
		if seen[token] {
			t.Fatal("token repeated")
		}
		seen[token] = true
	}
}

// incoming returns a call's header metadata with the given authorization
// values.
func incoming(values ...string) metadata.MD {
	md := metadata.MD{}
	for _, v := range values {
		md.Append("authorization", v)
	}
	return md
}

func TestAuthenticatorCheck(t *testing.T) {
	token, digest, err := NewAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := NewAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	a := newAuthenticator(digest, nil)
	cases := []struct {
		name    string
		md      metadata.MD
		message string // "" accepts
	}{
		{"right token", incoming("Bearer " + token), ""},
		{"scheme case-insensitive", incoming("bearer " + token), ""},
		{"extra spaces after scheme", incoming("Bearer   " + token), ""},
		{"no metadata", nil, msgMissingToken},
		{"no authorization", incoming(), msgMissingToken},
		{"wrong token", incoming("Bearer " + other), msgInvalidToken},
		{"token without scheme", incoming(token), msgInvalidToken},
		{"basic scheme", incoming("Basic " + token), msgInvalidToken},
		{"empty bearer", incoming("Bearer "), msgInvalidToken},
		{"trailing garbage", incoming("Bearer " + token + " x"), msgInvalidToken},
		{"truncated token", incoming("Bearer " + token[:len(token)-1]), msgInvalidToken},
		{"digest as token", incoming("Bearer " + fmt.Sprintf("%x", digest)), msgInvalidToken},
		{"two values", incoming("Bearer "+token, "Bearer "+token), msgInvalidToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.check(tc.md, adminv1.InstallationService_GetInstallation_FullMethodName)
			if tc.message == "" {
				if err != nil || !p.Admin() {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			s, info, _ := decode(t, err)
			if s.Code() != codes.Unauthenticated || s.Message() != tc.message || info.GetReason() != string(ReasonUnauthenticated) {
				t.Fatalf("got %v %q %q", s.Code(), s.Message(), info.GetReason())
			}
			assertNoToken(t, err, token, other)
		})
	}
}

// assertNoToken fails when any token (or its secret part) appears in err.
func assertNoToken(t *testing.T, err error, tokens ...string) {
	t.Helper()
	s, _ := status.FromError(err)
	text := err.Error() + fmt.Sprint(s.Proto())
	for _, tok := range tokens {
		if strings.Contains(text, tok) || strings.Contains(text, strings.TrimPrefix(tok, TokenPrefix)) {
			t.Fatal("an error carries a token")
		}
	}
}

func TestAuthenticatorFailsClosedWithoutDigest(t *testing.T) {
	token, _, err := NewAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	for _, digest := range [][]byte{nil, {}, make([]byte, 31)} {
		a := newAuthenticator(digest, nil)
		// Even the SHA-256 of the empty string or a zero digest must not
		// match an unset configuration.
		for _, presented := range []string{"Bearer " + token, "Bearer x"} {
			if _, err := a.check(incoming(presented), ""); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("digest of %d bytes accepted a call", len(digest))
			}
		}
	}
	zero := newAuthenticator(make([]byte, 32), nil)
	if _, err := zero.check(incoming("Bearer "+token), ""); err == nil {
		t.Fatal("zero digest accepted a token")
	}
}

// TestTapExemptsOnlyHealthAndReflection: the tap handle lets the health
// service and reflection through without a token and refuses every other
// method, registered or not, with the admin API's UNAUTHENTICATED.
func TestTapExemptsOnlyHealthAndReflection(t *testing.T) {
	_, digest, err := NewAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	a := newAuthenticator(digest, nil)
	cases := []struct {
		method string
		exempt bool
	}{
		{"/grpc.health.v1.Health/Check", true},
		{"/grpc.health.v1.Health/Watch", true},
		{"/grpc.health.v1.Health/List", true},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", true},
		{"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", true},
		{"/berth.admin.v1.InstallationService/GetInstallation", false},
		{"/grpc.health.v1.HealthX/Check", false},
		{"/x/grpc.health.v1.Health/Check", false},
		{"/grpc.reflection.v1.ServerReflectionX/ServerReflectionInfo", false},
		{"/berth.admin.v1.SessionService/CreateSession", false},
	}
	for _, tc := range cases {
		t.Run(tc.method, func(t *testing.T) {
			ctx := context.Background()
			got, err := a.tap(ctx, &tap.Info{FullMethodName: tc.method, Header: metadata.MD{}})
			if got != ctx {
				t.Fatal("tap replaced the context")
			}
			if tc.exempt {
				if err != nil {
					t.Fatalf("refused an exempt method: %v", err)
				}
				return
			}
			s, info, _ := decode(t, err)
			if s.Code() != codes.Unauthenticated || info.GetReason() != string(ReasonUnauthenticated) {
				t.Fatalf("got %v %q", s.Code(), info.GetReason())
			}
		})
	}
}
