package runtimeclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/runtimebootstrap"
	"berth.dev/runtimebootstrap/internal/gatewaytest"
)

// testCA is a CA and a server certificate it issued for 127.0.0.1, as
// Core's installation CA issues its gateway's.
func testCA(t *testing.T) (caPEM []byte, server tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "gateway"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}
}

// runTLS starts a client for url with the bootstrap file in dir and
// reports whether it reached Core (its Hello arrived) within a while.
func runTLS(t *testing.T, core *gatewaytest.Core, url, dir string) bool {
	t.Helper()
	c, err := New(Config{
		Bootstrap:     runtimebootstrap.File{Version: 1, CoreURL: url, DeviceID: testDevice, Credential: runtimebootstrap.NewSecret(testCredential)},
		BootstrapPath: filepath.Join(dir, "runtime-bootstrap.json"),
		Backoff:       Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	conn, ok := core.TryAccept(t, 3*time.Second)
	if !ok {
		return false
	}
	if conn.Next().GetHello().GetDeviceId() != testDevice {
		t.Fatal("the first message over TLS was not the Hello")
	}
	return true
}

// TestHTTPSTrustsTheCABesideTheBootstrapFile: with the CA file beside the
// bootstrap file, the Runtime trusts exactly that CA for Core's https URL
// (Core's gateway certificate issued from the installation CA); without
// it, the system roots, which do not know that CA, so it never connects,
// and with another CA it never connects either.
func TestHTTPSTrustsTheCABesideTheBootstrapFile(t *testing.T) {
	caPEM, cert := testCA(t)
	core, url := gatewaytest.StartTLS(t, cert)

	without := t.TempDir()
	if runTLS(t, core, url, without) {
		t.Fatal("connected over TLS to a certificate no trusted root issued")
	}
	// Another CA beside the bootstrap file (another installation's) is
	// refused as well: only the CA that issued the gateway's certificate.
	otherCA, _ := testCA(t)
	wrong := t.TempDir()
	if err := os.WriteFile(filepath.Join(wrong, runtimebootstrap.CAFile), otherCA, 0o644); err != nil {
		t.Fatal(err)
	}
	if runTLS(t, core, url, wrong) {
		t.Fatal("connected over TLS with another CA beside the bootstrap file")
	}
	with := t.TempDir()
	if err := os.WriteFile(filepath.Join(with, runtimebootstrap.CAFile), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if !runTLS(t, core, url, with) {
		t.Fatal("did not connect with the CA beside the bootstrap file")
	}

	// A CA file that holds no certificate is refused at start.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, runtimebootstrap.CAFile), []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{
		Bootstrap:     runtimebootstrap.File{Version: 1, CoreURL: url, DeviceID: testDevice, Credential: runtimebootstrap.NewSecret(testCredential)},
		BootstrapPath: filepath.Join(bad, "runtime-bootstrap.json"),
	})
	if err == nil {
		t.Fatal("a CA file without a certificate was accepted")
	}
}

// TestPlaintextOnlyToPrivateAddresses: http is refused to a public
// address or a name unless allowed explicitly; loopback, private
// addresses and localhost are allowed.
func TestPlaintextOnlyToPrivateAddresses(t *testing.T) {
	for url, allowed := range map[string]bool{
		"http://127.0.0.1:7780":    true,
		"http://[::1]:7780":        true,
		"http://localhost:7780":    true,
		"http://10.1.2.3:7780":     true,
		"http://172.17.0.1:7780":   true,
		"http://192.168.1.1":       true,
		"http://[fd00::1]:7780":    true,
		"http://203.0.113.7:7780":  false,
		"http://core.example:7780": false,
		"http://[2001:db8::1]":     false,
	} {
		cfg := Config{
			Bootstrap:     runtimebootstrap.File{Version: 1, CoreURL: url, DeviceID: testDevice, Credential: runtimebootstrap.NewSecret(testCredential)},
			BootstrapPath: filepath.Join(t.TempDir(), "runtime-bootstrap.json"),
		}
		_, err := New(cfg)
		if allowed && err != nil {
			t.Errorf("%s: %v", url, err)
		}
		if !allowed && !errors.Is(err, ErrPlaintextRefused) {
			t.Errorf("%s: %v, want ErrPlaintextRefused", url, err)
		}
		cfg.AllowInsecure = true
		if _, err := New(cfg); err != nil {
			t.Errorf("%s with AllowInsecure: %v", url, err)
		}
	}
}
