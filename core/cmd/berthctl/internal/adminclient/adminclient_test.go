package adminclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

const secret = "berth-admin-v1.c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1zaG93"

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolveOrder(t *testing.T) {
	stored := adminclient.Settings{Address: "127.0.0.1:1", TokenFile: "/stored"}
	e := env(map[string]string{adminclient.AddressEnv: "127.0.0.1:2", adminclient.TokenFileEnv: "/env"})
	for _, c := range []struct {
		flags  adminclient.Settings
		getenv func(string) string
		want   adminclient.Settings
	}{
		{adminclient.Settings{}, env(nil), stored},
		{adminclient.Settings{}, e, adminclient.Settings{Address: "127.0.0.1:2", TokenFile: "/env"}},
		{adminclient.Settings{Address: "127.0.0.1:3"}, e, adminclient.Settings{Address: "127.0.0.1:3", TokenFile: "/env"}},
		{adminclient.Settings{TokenFile: "/flag"}, env(nil), adminclient.Settings{Address: "127.0.0.1:1", TokenFile: "/flag"}},
	} {
		if got := adminclient.Resolve(c.flags, c.getenv, stored); got != c.want {
			t.Errorf("Resolve(%+v) = %+v, want %+v", c.flags, got, c.want)
		}
	}
}

func TestConfigPath(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{adminclient.ConfigEnv: "/x/c.json", "HOME": "/home/a"}, "/x/c.json"},
		{map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/home/a"}, "/xdg/berth/berthctl.json"},
		{map[string]string{"HOME": "/home/a"}, "/home/a/.config/berth/berthctl.json"},
	} {
		if got, err := adminclient.ConfigPath(env(c.env)); err != nil || got != c.want {
			t.Errorf("ConfigPath(%v) = %q, %v; want %q", c.env, got, err, c.want)
		}
	}
	if _, err := adminclient.ConfigPath(env(nil)); adminclient.Reason(err) != "no_config_path" {
		t.Errorf("ConfigPath without HOME: %v", err)
	}
}

func TestSettingsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "berth", "berthctl.json")
	if s, err := adminclient.LoadSettings(path); err != nil || s != (adminclient.Settings{}) {
		t.Fatalf("a missing file: %+v, %v", s, err)
	}
	want := adminclient.Settings{Address: "127.0.0.1:7700", TokenFile: "/var/lib/berth-core/admin-token"}
	if err := adminclient.SaveSettings(path, want); err != nil {
		t.Fatal(err)
	}
	if got, err := adminclient.LoadSettings(path); err != nil || got != want {
		t.Fatalf("LoadSettings = %+v, %v", got, err)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if info, err := os.Stat(p); err != nil || info.Mode().Perm() != mode {
			t.Errorf("%s: %v, want %v", p, info.Mode(), mode)
		}
	}
	if err := os.WriteFile(path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := adminclient.LoadSettings(path); adminclient.Reason(err) != "config_invalid" {
		t.Errorf("a broken file: %v", err)
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		s      adminclient.Settings
		reason string
	}{
		{adminclient.Settings{Address: "127.0.0.1:7700", TokenFile: "/t"}, ""},
		{adminclient.Settings{Address: "localhost:7700", TokenFile: "/t"}, ""},
		{adminclient.Settings{Address: "[::1]:7700", TokenFile: "/t"}, ""},
		{adminclient.Settings{TokenFile: "/t"}, "not_logged_in"},
		{adminclient.Settings{Address: "127.0.0.1:7700"}, "not_logged_in"},
		{adminclient.Settings{Address: "127.0.0.1", TokenFile: "/t"}, "address_invalid"},
		{adminclient.Settings{Address: "core.example:7700", TokenFile: "/t"}, "address_not_loopback"},
		{adminclient.Settings{Address: "10.0.0.1:7700", TokenFile: "/t"}, "address_not_loopback"},
	} {
		if got := adminclient.Reason(c.s.Check()); got != c.reason {
			t.Errorf("Check(%+v): %q, want %q", c.s, got, c.reason)
		}
	}
}

func TestTokenNeverPrinted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(path, []byte("  "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := adminclient.ReadToken(path)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("token", "token", tok)
	for _, out := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s %q %x", tok, tok, tok, tok, tok, tok), tok.String(), logged.String()} {
		if strings.Contains(out, "c2VjcmV0") || !strings.Contains(out, "[redacted]") {
			t.Errorf("printed %q", out)
		}
	}
	for content, reason := range map[string]string{
		"":                         "token_file_invalid",
		"\n \n":                    "token_file_invalid",
		secret + "\n" + secret:     "token_file_invalid",
		strings.Repeat("x", 5<<10): "token_file_invalid",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := adminclient.ReadToken(path); adminclient.Reason(err) != reason || strings.Contains(err.Error(), secret) {
			t.Errorf("token file %.20q: %v, want %s", content, err, reason)
		}
	}
	if _, err := adminclient.ReadToken(filepath.Join(t.TempDir(), "none")); adminclient.Reason(err) != "token_file_unreadable" {
		t.Errorf("a missing token file: %v", err)
	}
}

// TestDialSendsBearer dials a gRPC server on loopback and checks the
// authorization header each call carries.
func TestDialSendsBearer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		got = md.Get("authorization")
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)

	path := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := adminclient.ReadToken(path)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := adminclient.Dial(l.Addr().String(), tok)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "Bearer "+secret {
		t.Fatalf("authorization %q", got)
	}
	if _, err := adminclient.Dial("192.0.2.1:7700", tok); adminclient.Reason(err) != "address_not_loopback" {
		t.Fatalf("Dial off loopback: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	refusal, err := status.New(codes.FailedPrecondition, "node is enabled: retire it first").
		WithDetails(&errdetails.ErrorInfo{Reason: "node_enabled", Domain: adminv1.ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := status.New(codes.FailedPrecondition, "nope").WithDetails(&errdetails.ErrorInfo{Reason: "x", Domain: "other.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		err         error
		want        string
		unreachable bool
	}{
		{refusal.Err(), "node_enabled: node is enabled: retire it first", false},
		{fmt.Errorf("wrapped: %w", refusal.Err()), "node_enabled: node is enabled: retire it first", false},
		{foreign.Err(), "failed_precondition: nope", false},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), "deadline_exceeded: context deadline exceeded", false},
		{status.Error(codes.Unavailable, "connection refused"), "unavailable: connection refused", true},
		{adminclient.Errorf("not_logged_in", "run login"), "not_logged_in: run login", false},
		{errors.New("plain"), "plain", false},
	} {
		if got := adminclient.Describe(c.err); got != c.want {
			t.Errorf("Describe(%v) = %q, want %q", c.err, got, c.want)
		}
		if got := adminclient.Unreachable(c.err); got != c.unreachable {
			t.Errorf("Unreachable(%v) = %v", c.err, got)
		}
	}
}
