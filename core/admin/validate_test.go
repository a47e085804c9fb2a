package admin

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"berth.dev/platform/errgrpc"
	"berth.dev/sandbox/errdefs"
)

const (
	u1 = "0b5a4c2e-7f1d-4e3a-9c8b-2d6f1e0a9b7c"
	u2 = "8e2f6a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	h1 = "0123456789abcdef0123456789abcdef"
)

func TestValidateName(t *testing.T) {
	cases := []struct {
		name   string
		value  string
		p      Pattern
		ids    []string
		reason string // "" accepts
	}{
		{"installation", "installation", InstallationName, nil, ""},
		{"deployment", "deployment", DeploymentName, nil, ""},
		{"node", "nodes/" + u1, NodeName, []string{u1}, ""},
		{"session", "sessions/" + u1, SessionName, []string{u1}, ""},
		{"turn", "sessions/" + u1 + "/turns/" + u2, TurnName, []string{u1, u2}, ""},
		{"allocation", "allocations/" + u2, AllocationName, []string{u2}, ""},
		{"enrollment token", "enrollmentTokens/" + h1, EnrollmentTokenName, []string{h1}, ""},

		{"empty", "", SessionName, nil, "required"},
		{"wrong singleton", "installations", InstallationName, nil, "must match installation"},
		{"singleton with id", "installation/" + u1, InstallationName, nil, "must match installation"},
		{"wrong collection", "nodes/" + u1, SessionName, nil, "must match sessions/{session}"},
		{"missing id", "sessions/", SessionName, nil, "must match sessions/{session}"},
		{"collection only", "sessions", SessionName, nil, "must match sessions/{session}"},
		{"uppercase uuid", "sessions/" + strings.ToUpper(u1), SessionName, nil, "must match sessions/{session}"},
		{"braced uuid", "sessions/{" + u1 + "}", SessionName, nil, "must match sessions/{session}"},
		{"urn uuid", "sessions/urn:uuid:" + u1, SessionName, nil, "must match sessions/{session}"},
		{"unhyphenated uuid", "sessions/" + strings.ReplaceAll(u1, "-", ""), SessionName, nil, "must match sessions/{session}"},
		{"trailing slash", "sessions/" + u1 + "/", SessionName, nil, "must match sessions/{session}"},
		{"leading slash", "/sessions/" + u1, SessionName, nil, "must match sessions/{session}"},
		{"turn under wrong parent", "nodes/" + u1 + "/turns/" + u2, TurnName, nil, "must match sessions/{session}/turns/{turn}"},
		{"turn bad child", "sessions/" + u1 + "/turns/x", TurnName, nil, "must match sessions/{session}/turns/{turn}"},
		{"token uuid", "enrollmentTokens/" + u1, EnrollmentTokenName, nil, "must match enrollmentTokens/{token}"},
		{"token uppercase hex", "enrollmentTokens/" + strings.ToUpper(h1), EnrollmentTokenName, nil, "must match enrollmentTokens/{token}"},
		{"token short", "enrollmentTokens/" + h1[:31], EnrollmentTokenName, nil, "must match enrollmentTokens/{token}"},
		{"too long", "sessions/" + strings.Repeat("a", 300), SessionName, nil, "too long"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ids, err := ValidateName("request.name", tc.value, tc.p)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !slices.Equal(ids, tc.ids) {
					t.Fatalf("ids %v, want %v", ids, tc.ids)
				}
				if got := tc.p.Format(ids...); got != tc.value {
					t.Fatalf("Format gives %q", got)
				}
				return
			}
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || !errdefs.IsInvalid(err) {
				t.Fatalf("not a field error: %v", err)
			}
			if fe.Field != "request.name" || fe.Reason != tc.reason {
				t.Fatalf("got %q %q", fe.Field, fe.Reason)
			}
			if !strings.Contains(tc.p.String(), tc.value) && strings.Contains(err.Error(), tc.value) {
				t.Fatal("the error echoes the value")
			}
			if !errgrpc.SafeMessage(fe.Reason) {
				t.Fatalf("reason %q would not cross", fe.Reason)
			}
		})
	}
}

func TestMustPatternRejectsMalformedTemplates(t *testing.T) {
	for _, tc := range []struct {
		template string
		rules    []IDRule
	}{
		{"sessions//turns", nil},
		{"sessions/{}", nil},
		{"sessions/{session", nil},
		{"sessions/x{session}", nil},
		{"sessions/{session}", []IDRule{UUIDID, UUIDID}},
		{"sessions/{session}/turns/{turn}", []IDRule{UUIDID}},
	} {
		t.Run(tc.template, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			MustPattern(tc.template, tc.rules...)
		})
	}
}

func TestValidateRequestID(t *testing.T) {
	cases := []struct {
		value  string
		reason string
	}{
		{u1, ""},
		{"", "required"},
		{"not-a-uuid", "must be a canonical UUID"},
		{strings.ToUpper(u1), "must be a canonical UUID"},
		{"{" + u1 + "}", "must be a canonical UUID"},
		{strings.ReplaceAll(u1, "-", ""), "must be a canonical UUID"},
	}
	for _, tc := range cases {
		err := ValidateRequestID("request_id", tc.value)
		if tc.reason == "" {
			if err != nil {
				t.Fatalf("%q refused: %v", tc.value, err)
			}
			continue
		}
		var fe *errdefs.FieldError
		if !errors.As(err, &fe) || fe.Field != "request_id" || fe.Reason != tc.reason {
			t.Fatalf("%q: got %v", tc.value, err)
		}
	}
}

func TestPageSize(t *testing.T) {
	cases := []struct {
		in      int32
		want    int
		invalid bool
	}{
		{0, DefaultPageSize, false},
		{1, 1, false},
		{50, 50, false},
		{999, 999, false},
		{1000, 1000, false},
		{1001, MaxPageSize, false},
		{1 << 30, MaxPageSize, false},
		{-1, 0, true},
		{-1 << 31, 0, true},
	}
	for _, tc := range cases {
		got, err := PageSize("page_size", tc.in)
		if tc.invalid {
			if f, ok := errdefs.Field(err); !ok || f != "page_size" {
				t.Fatalf("%d: got %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Fatalf("%d: got %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
