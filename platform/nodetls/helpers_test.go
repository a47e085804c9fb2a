package nodetls

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// newID returns a random canonical (version 4) UUID.
func newID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newTestCA creates a CA whose validity starts two days ago, so that tests
// can issue certificates that have already expired.
func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA(newID(t), time.Now().Add(-48*time.Hour))
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

// issueNode runs the node side (key, CSR) and the CA side (SignNodeCSR).
func issueNode(t *testing.T, ca *CA, nodeID string, now time.Time, validity time.Duration) tls.Certificate {
	t.Helper()
	key, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key, nodeID)
	if err != nil {
		t.Fatalf("NewCSR: %v", err)
	}
	der, err := ca.SignNodeCSR(csr, nodeID, now, validity)
	if err != nil {
		t.Fatalf("SignNodeCSR: %v", err)
	}
	c, err := TLSCertificate(der, key)
	if err != nil {
		t.Fatalf("TLSCertificate: %v", err)
	}
	return c
}

func issueCore(t *testing.T, ca *CA, now time.Time, validity time.Duration) tls.Certificate {
	t.Helper()
	c, err := ca.IssueCore(ca.InstallationID(), now, validity)
	if err != nil {
		t.Fatalf("IssueCore: %v", err)
	}
	return c
}

// craft signs an arbitrary leaf with parentKey under parent (parent == nil:
// self-signed), bypassing every check of the issuing API: this is what an
// attacker, or a buggy issuer, could produce.
func craft(t *testing.T, parent *x509.Certificate, parentKey crypto.Signer, subject pkix.Name, uri string, eku []x509.ExtKeyUsage, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               subject,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{u},
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// rogueClient presents cert (or nothing) and accepts any server: a client
// that does not play by the rules.
func rogueClient(cert *tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert == nil {
				return &tls.Certificate{}, nil
			}
			return cert, nil
		},
	}
}

// rogueServer presents cert and accepts any client.
func rogueServer(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert,
	}
}

// handshake runs a real TLS handshake over loopback TCP. On success the
// server writes "ok" and the client reads it, so that a rejection by the
// server after the client's side of a TLS 1.3 handshake completed still
// surfaces as a client error.
func handshake(t *testing.T, server, client *tls.Config) (state tls.ConnectionState, serverErr, clientErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	conn, done := connectOnce(t, func(conn net.Conn) error {
		tc := tls.Server(conn, server)
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		_, err := tc.Write([]byte("ok"))
		return err
	})
	tc := tls.Client(conn, client)
	clientErr = tc.HandshakeContext(ctx)
	if clientErr == nil {
		buf := make([]byte, 2)
		if _, err := io.ReadFull(tc, buf); err != nil {
			clientErr = fmt.Errorf("read after handshake: %w", err)
		} else if string(buf) != "ok" {
			clientErr = fmt.Errorf("read %q after handshake", buf)
		}
		state = tc.ConnectionState()
	}
	serverErr = <-done
	return state, serverErr, clientErr
}

// connectOnce listens on a loopback port, hands the one connection it
// accepts to serve, and returns the client's end of it; both ends have a
// ten-second deadline and are closed at the end of the test. done carries
// serve's error, or the accept's.
func connectOnce(t *testing.T, serve func(net.Conn) error) (conn net.Conn, done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		served <- serve(conn)
	}()
	conn, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn, served
}

// newParsedToken issues an hour's enrollment token for ca and parses it
// back; it returns the token's text and secret hash with the parsed token.
func newParsedToken(t *testing.T, ca *CA) (text string, hash []byte, tok Token) {
	t.Helper()
	text, _, hash, _, err := NewToken(ca.Fingerprint(), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok, err = ParseToken(text)
	if err != nil {
		t.Fatal(err)
	}
	return text, hash, tok
}

// signNode signs csr for nodeID and parses the certificate the CA returns.
func signNode(t *testing.T, ca *CA, csr []byte, nodeID string, now time.Time, validity time.Duration) *x509.Certificate {
	t.Helper()
	der, err := ca.SignNodeCSR(csr, nodeID, now, validity)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantOutcome asserts the handshake succeeded when want is empty (a control
// case) and was otherwise rejected by rejecter with an error mentioning want.
func wantOutcome(t *testing.T, serverErr, clientErr error, rejecter, want string) {
	t.Helper()
	if want == "" {
		if serverErr != nil || clientErr != nil {
			t.Fatalf("control case failed: %v / %v", serverErr, clientErr)
		}
		return
	}
	wantRejected(t, serverErr, clientErr, rejecter, want)
}

// wantRejected asserts that the handshake failed on both ends and that the
// rejecting side's error mentions want.
func wantRejected(t *testing.T, serverErr, clientErr error, rejecter, want string) {
	t.Helper()
	if serverErr == nil || clientErr == nil {
		t.Fatalf("handshake not rejected: server error %v, client error %v", serverErr, clientErr)
	}
	err := serverErr
	if rejecter == "client" {
		err = clientErr
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%s error %q does not mention %q (other side: %v)", rejecter, err, want, errors.Join(serverErr, clientErr))
	}
}
