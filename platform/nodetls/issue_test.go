package nodetls

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSignNodeCSR(t *testing.T) {
	ca := newTestCA(t)
	nodeID := newID(t)
	key, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := signNode(t, ca, csr, nodeID, now, 24*time.Hour)
	checkLeaf(t, c, ca, NodeURI(nodeID), x509.ExtKeyUsageServerAuth)
	if !c.NotAfter.Equal(now.Add(24*time.Hour).Truncate(time.Second)) || c.NotBefore.After(now) {
		t.Errorf("validity [%s, %s], issued at %s", c.NotBefore, c.NotAfter, now)
	}
	if !key.Public().(*ecdsa.PublicKey).Equal(c.PublicKey) {
		t.Error("certificate is not for the CSR's key")
	}
	if got, err := NodeIdentity(c); err != nil || got != nodeID {
		t.Errorf("NodeIdentity = %q, %v", got, err)
	}
	if _, err := CoreIdentity(c); err == nil {
		t.Error("a node certificate has a Core identity")
	}
	if _, err := TLSCertificate(c.Raw, key); err != nil {
		t.Errorf("TLSCertificate: %v", err)
	}
	otherKey, _ := NewNodeKey()
	if _, err := TLSCertificate(c.Raw, otherKey); err == nil {
		t.Error("TLSCertificate accepted a key that is not the certificate's")
	}

	// Serials are random.
	c2 := signNode(t, ca, csr, nodeID, now, time.Hour)
	if c2.SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two certificates share a serial number")
	}

	// Bounds.
	for _, v := range []time.Duration{0, -time.Hour, MaxLeafValidity + time.Second} {
		if _, err := ca.SignNodeCSR(csr, nodeID, now, v); err == nil {
			t.Errorf("validity %s accepted", v)
		}
	}
	if _, err := ca.SignNodeCSR(csr, nodeID, now, MaxLeafValidity); err != nil {
		t.Errorf("validity MaxLeafValidity refused: %v", err)
	}
	if _, err := ca.SignNodeCSR(csr, nodeID, ca.Certificate().NotAfter.Add(-time.Hour), 2*time.Hour); err == nil {
		t.Error("a certificate outliving the CA was issued")
	}
	if _, err := ca.SignNodeCSR(csr, nodeID, ca.Certificate().NotBefore.Add(-time.Hour), time.Hour); err == nil {
		t.Error("a certificate predating the CA was issued")
	}
	if _, err := ca.SignNodeCSR(csr, nodeID, time.Time{}, time.Hour); err == nil {
		t.Error("zero issuance time accepted")
	}
	for _, bad := range []string{"", strings.ToUpper(nodeID), "node-1"} {
		if _, err := ca.SignNodeCSR(csr, bad, now, time.Hour); err == nil {
			t.Errorf("node id %q accepted", bad)
		}
	}
	if _, err := ca.SignNodeCSR([]byte("not a CSR"), nodeID, now, time.Hour); err == nil {
		t.Error("garbage CSR accepted")
	}
}

// checkLeaf asserts the shape of every leaf the CA issues.
func checkLeaf(t *testing.T, c *x509.Certificate, ca *CA, uri string, eku x509.ExtKeyUsage) {
	t.Helper()
	if err := c.CheckSignatureFrom(ca.Certificate()); err != nil {
		t.Errorf("not signed by the CA: %v", err)
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != uri {
		t.Errorf("URIs %v, want exactly %s", c.URIs, uri)
	}
	if len(c.DNSNames)+len(c.IPAddresses)+len(c.EmailAddresses) != 0 {
		t.Errorf("extra SANs: %v %v %v", c.DNSNames, c.IPAddresses, c.EmailAddresses)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{eku}) || len(c.UnknownExtKeyUsage) != 0 {
		t.Errorf("extended key usage %v %v, want only %v", c.ExtKeyUsage, c.UnknownExtKeyUsage, eku)
	}
	if c.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("key usage %v", c.KeyUsage)
	}
	if c.IsCA || !c.BasicConstraintsValid {
		t.Errorf("IsCA %v, basic constraints valid %v", c.IsCA, c.BasicConstraintsValid)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v", c.SerialNumber)
	}
	if c.Subject.CommonName == "" || c.Subject.Organization[0] != "Berth" {
		t.Errorf("subject %v", c.Subject)
	}
}

func TestSignNodeCSRIgnoresRequestedNames(t *testing.T) {
	ca := newTestCA(t)
	nodeID, otherNode := newID(t), newID(t)
	key, _ := NewNodeKey()
	var uris []*url.URL
	for _, s := range []string{NodeURI(otherNode), CoreURI(ca.InstallationID()), "https://evil.example/"} {
		u, _ := url.Parse(s)
		uris = append(uris, u)
	}
	isCA, _ := asn1.Marshal(struct {
		IsCA bool
	}{true})
	eku, _ := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 2}}) // ClientAuth
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:        pkix.Name{CommonName: "admin", Organization: []string{"Core"}},
		DNSNames:       []string{"core.example", "localhost"},
		IPAddresses:    []net.IP{net.ParseIP("127.0.0.1")},
		EmailAddresses: []string{"root@example.com"},
		URIs:           uris,
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: isCA},
			{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Value: eku},
		},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	c := signNode(t, ca, csr, nodeID, time.Now(), time.Hour)
	checkLeaf(t, c, ca, NodeURI(nodeID), x509.ExtKeyUsageServerAuth)
	if strings.Contains(c.Subject.String(), "admin") || strings.Contains(c.Subject.String(), "Core") {
		t.Errorf("subject %q came from the CSR", c.Subject)
	}
}

func TestSignNodeCSRRejectsKeysAndSignatures(t *testing.T) {
	ca := newTestCA(t)
	nodeID := newID(t)
	csrFor := func(key crypto.Signer) []byte {
		t.Helper()
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: nodeID},
		}, key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	for name, key := range map[string]crypto.Signer{"RSA": rsaKey, "P-384": p384, "Ed25519": edKey} {
		_, err := ca.SignNodeCSR(csrFor(key), nodeID, time.Now(), time.Hour)
		if err == nil || !strings.Contains(err.Error(), "P-256") {
			t.Errorf("%s CSR: err = %v, want a key-type refusal", name, err)
		}
		if _, err := NewCSR(key, nodeID); err == nil {
			t.Errorf("NewCSR accepted a %s key", name)
		}
	}

	// A valid P-256 CSR whose signature is then damaged.
	key, _ := NewNodeKey()
	good := csrFor(key)
	parsed, err := x509.ParseCertificateRequest(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	// The last byte of the DER belongs to the signature value.
	bad[len(bad)-1] ^= 0x01
	if p, err := x509.ParseCertificateRequest(bad); err != nil || bytes.Equal(p.Signature, parsed.Signature) {
		t.Fatalf("damaged CSR does not parse with a different signature: %v", err)
	}
	if _, err := ca.SignNodeCSR(bad, nodeID, time.Now(), time.Hour); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("bad signature: err = %v", err)
	}

	// A CSR whose public key was swapped after signing.
	otherKey, _ := NewNodeKey()
	swapped := bytes.Replace(good, pubBytes(t, key), pubBytes(t, otherKey), 1)
	if bytes.Equal(swapped, good) {
		t.Fatal("public key not found in the CSR")
	}
	if _, err := ca.SignNodeCSR(swapped, nodeID, time.Now(), time.Hour); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("swapped key: err = %v", err)
	}
}

func pubBytes(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	b, err := key.Public().(*ecdsa.PublicKey).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIssueCore(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	client, err := ca.IssueCore(ca.InstallationID(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(client.Certificate) != 1 || client.Leaf == nil || client.PrivateKey == nil {
		t.Fatalf("client certificate shape: %d certs", len(client.Certificate))
	}
	checkLeaf(t, client.Leaf, ca, CoreURI(ca.InstallationID()), x509.ExtKeyUsageClientAuth)
	if got, err := CoreIdentity(client.Leaf); err != nil || got != ca.InstallationID() {
		t.Errorf("CoreIdentity = %q, %v", got, err)
	}

	server, err := ca.IssueCoreServer(ca.InstallationID(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(server.Certificate) != 2 || !bytes.Equal(server.Certificate[1], ca.Certificate().Raw) {
		t.Fatalf("server chain is not leaf + CA")
	}
	checkLeaf(t, server.Leaf, ca, CoreURI(ca.InstallationID()), x509.ExtKeyUsageServerAuth)

	if _, err := ca.IssueCore(newID(t), now, time.Hour); err == nil {
		t.Error("IssueCore issued for another installation")
	}
	if _, err := ca.IssueCore(ca.InstallationID(), now, 2*MaxLeafValidity); err == nil {
		t.Error("IssueCore accepted an unbounded validity")
	}
}
