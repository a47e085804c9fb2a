package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGatewayServesTLSFromTheInstallationCA: with an https public URL and
// no certificate of the operator's, the Runtime gateway serves TLS with a
// certificate for the URL's host that the installation CA (as stored)
// verifies, and the Runtimes get that CA to trust.
func TestGatewayServesTLSFromTheInstallationCA(t *testing.T) {
	cfg := testConfig(t) // https://core.berth.test
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := start(t, ctx, cfg)
	ca, err := openStore(t, cfg.DatabaseURL).LoadCA(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ca.CertificatePEM)) {
		t.Fatal("the stored CA is not PEM")
	}
	handshake := func(server string) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.ready.RuntimeAddr,
			&tls.Config{ServerName: server, RootCAs: roots, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := handshake("core.berth.test"); err != nil {
		t.Fatalf("TLS to the gateway as core.berth.test: %v", err)
	}
	if err := handshake("other.berth.test"); err == nil {
		t.Fatal("the gateway's certificate verified for another host")
	}
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
}

// TestGatewayTLSConfigurationIsChecked: an http public URL needs
// --runtime-insecure; with it the gateway is plaintext; an operator's
// certificate that does not load, or half of one, is refused before
// anything serves.
func TestGatewayTLSConfigurationIsChecked(t *testing.T) {
	run := func(cfg Config) error {
		return Run(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(Ready) { t.Error("Core served") })
	}
	cfg := testConfig(t)
	cfg.PublicURL = "http://10.0.0.1:7780"
	if err := run(cfg); err == nil || !strings.Contains(err.Error(), "public_url") {
		t.Fatalf("an http public URL without --runtime-insecure: %v", err)
	}

	half := testConfig(t)
	half.RuntimeTLSCertFile = "/nonexistent/cert.pem"
	if err := run(half); err == nil || !strings.Contains(err.Error(), "runtime_tls_cert") {
		t.Fatalf("a certificate without its key: %v", err)
	}
	bad := testConfig(t)
	dir := t.TempDir()
	bad.RuntimeTLSCertFile, bad.RuntimeTLSKeyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []string{bad.RuntimeTLSCertFile, bad.RuntimeTLSKeyFile} {
		if err := os.WriteFile(f, []byte("not pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(bad); err == nil || !strings.Contains(err.Error(), "runtime_tls_cert") {
		t.Fatalf("a certificate that does not load: %v", err)
	}

	insecureCfg := testConfig(t)
	insecureCfg.PublicURL = "http://10.0.0.1:7780"
	insecureCfg.RuntimeInsecure = true
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := start(t, ctx, insecureCfg)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.ready.RuntimeAddr,
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a handshake that must fail: the gateway is plaintext
	if err == nil {
		conn.Close()
		t.Fatal("a TLS handshake succeeded with the plaintext gateway")
	}
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
}
