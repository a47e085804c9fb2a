package nodetls

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewCA(t *testing.T) {
	id := newID(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ca, err := NewCA(id, now)
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Certificate()
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("basic constraints: IsCA %v valid %v pathlen %d zero %v", c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.MaxPathLenZero)
	}
	if c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("key usage %v", c.KeyUsage)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", c.PublicKey)
	}
	if !c.NotAfter.Equal(now.AddDate(10, 0, 0)) || c.NotBefore.After(now) {
		t.Errorf("validity [%s, %s]", c.NotBefore, c.NotAfter)
	}
	if !strings.Contains(c.Subject.CommonName, id) {
		t.Errorf("subject %q does not name installation %s", c.Subject, id)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if got, err := CAInstallationID(c); err != nil || got != id || ca.InstallationID() != id {
		t.Errorf("CAInstallationID = %q, %v; want %s", got, err, id)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v", c.SerialNumber)
	}
	if got, err := ParseCertificatePEM(ca.CertificatePEM()); err != nil || !got.Equal(c) {
		t.Errorf("CertificatePEM does not round-trip: %v", err)
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(ca.Fingerprint()) {
		t.Errorf("fingerprint %q", ca.Fingerprint())
	}

	for _, bad := range []string{"", "not-a-uuid", strings.ToUpper(id), "{" + id + "}", "00000000-0000-0000-0000-000000000000", strings.ReplaceAll(id, "-", "")} {
		if _, err := NewCA(bad, now); err == nil {
			t.Errorf("NewCA(%q) succeeded", bad)
		}
	}
}

func TestMarshalParseCA(t *testing.T) {
	ca := newTestCA(t)
	certPEM, keyPEM, err := MarshalCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got.Fingerprint() != ca.Fingerprint() || got.InstallationID() != ca.InstallationID() {
		t.Fatalf("round trip changed the CA: %v vs %v", got, ca)
	}
	// The parsed CA signs certificates that verify against the original.
	nodeID := newID(t)
	leaf := issueNode(t, got, nodeID, time.Now(), time.Hour).Leaf
	if err := leaf.CheckSignatureFrom(ca.Certificate()); err != nil {
		t.Fatalf("parsed CA cannot sign: %v", err)
	}

	other := newTestCA(t)
	_, otherKey, err := MarshalCA(other)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER})
	block, _ := pem.Decode(keyPEM)
	corrupt := bytes.Clone(block.Bytes)
	corrupt[len(corrupt)/2] ^= 0xff
	corruptPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: corrupt})
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})

	for name, tc := range map[string]struct{ cert, key []byte }{
		"other CA's key":  {certPEM, otherKey},
		"RSA key":         {certPEM, rsaPEM},
		"corrupt key":     {certPEM, corruptPEM},
		"no key":          {certPEM, nil},
		"key as cert":     {keyPEM, keyPEM},
		"leaf as CA":      {leafPEM, keyPEM},
		"two keys":        {certPEM, append(bytes.Clone(keyPEM), keyPEM...)},
		"truncated key":   {certPEM, keyPEM[:len(keyPEM)/2]},
		"EC key PEM type": {certPEM, bytes.Replace(keyPEM, []byte("PRIVATE KEY"), []byte("EC PRIVATE KEY"), 2)},
	} {
		_, err := ParseCA(tc.cert, tc.key)
		if err == nil {
			t.Errorf("%s: ParseCA succeeded", name)
			continue
		}
		assertNoKeyMaterial(t, name+" error", err.Error(), keyPEM, otherKey, rsaPEM, corruptPEM)
	}
}

// assertNoKeyMaterial fails if s contains any line of the PEM bodies, or
// the private scalar of any of the keys in decimal or hex.
func assertNoKeyMaterial(t *testing.T, what, s string, keyPEMs ...[]byte) {
	t.Helper()
	for _, k := range keyPEMs {
		for _, line := range strings.Split(string(k), "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(s, line[:16]) {
				t.Fatalf("%s contains key PEM text", what)
			}
		}
		block, _ := pem.Decode(k)
		if block == nil {
			continue
		}
		if key, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
			if ec, ok := key.(*ecdsa.PrivateKey); ok {
				raw, _ := ec.Bytes()
				decimal := new(big.Int).SetBytes(raw).String()
				if strings.Contains(s, fmt.Sprintf("%x", raw[:8])) || strings.Contains(s, fmt.Sprintf("%X", raw[:8])) ||
					strings.Contains(s, strings.Trim(fmt.Sprintf("%d", raw[:6]), "[]")) || strings.Contains(s, decimal[:16]) {
					t.Fatalf("%s contains the private scalar", what)
				}
			}
		}
	}
}

func TestCAFormatRedactsKey(t *testing.T) {
	ca := newTestCA(t)
	_, keyPEM, err := MarshalCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	type wrapper struct {
		Exported *CA
		hidden   *CA
	}
	w := wrapper{ca, ca}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		for _, v := range []any{ca, *ca, w, []*CA{ca}} {
			out := fmt.Sprintf(verb, v)
			assertNoKeyMaterial(t, "fmt "+verb, out, keyPEM)
		}
	}
	if s := ca.String(); !strings.Contains(s, ca.InstallationID()) || !strings.Contains(s, "redacted") {
		t.Errorf("String() = %q", s)
	}
}

func TestIdentity(t *testing.T) {
	id := newID(t)
	cert := func(uris ...string) *x509.Certificate {
		c := &x509.Certificate{}
		for _, s := range uris {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = append(c.URIs, u)
		}
		return c
	}
	if got, err := NodeIdentity(cert("urn:berth:node:" + id)); err != nil || got != id {
		t.Errorf("NodeIdentity = %q, %v", got, err)
	}
	if got, err := CoreIdentity(cert("urn:berth:core:" + id)); err != nil || got != id {
		t.Errorf("CoreIdentity = %q, %v", got, err)
	}
	if _, err := CoreIdentity(cert("urn:berth:node:" + id)); err == nil {
		t.Error("CoreIdentity accepted a node URI")
	}
	if _, err := NodeIdentity(cert("urn:berth:core:" + id)); err == nil {
		t.Error("NodeIdentity accepted a core URI")
	}
	if _, err := NodeIdentity(nil); err == nil {
		t.Error("NodeIdentity(nil) succeeded")
	}
	other := newID(t)
	for _, uris := range [][]string{
		{},
		{"urn:berth:node:" + id, "urn:berth:node:" + other},
		{"urn:berth:node:" + id, "urn:berth:node:" + id},
		{"urn:berth:node:" + id, "https://example.com/"},
		{"urn:berth:node:" + strings.ToUpper(id)},
		{"urn:berth:node:00000000-0000-0000-0000-000000000000"},
		{"urn:berth:node:" + id + "x"},
		{"urn:berth:node:" + id + "?q"},
		{"urn:berth:node:" + id + "#f"},
		{"urn:berth:node:" + strings.ReplaceAll(id, "-", "")},
		{"urn:berth:nodes:" + id},
		{"urn:berth:installation:" + id},
		{"urn:other:node:" + id},
		{"https://node/" + id},
		{"urn:berth:node:{" + id + "}"},
	} {
		if got, err := NodeIdentity(cert(uris...)); err == nil {
			t.Errorf("NodeIdentity(%q) = %q, want an error", uris, got)
		}
	}
}

func TestNodeKeyPEM(t *testing.T) {
	key, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := MarshalKey(key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !got.(*ecdsa.PrivateKey).Equal(key) {
		t.Fatal("key does not round-trip")
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := MarshalKey(p384); err == nil {
		t.Error("MarshalKey accepted a P-384 key")
	}
	for name, bad := range map[string][]byte{
		"empty":     nil,
		"truncated": keyPEM[:len(keyPEM)-40],
		"trailing":  append(bytes.Clone(keyPEM), "junk"...),
		"cert":      newTestCA(t).CertificatePEM(),
	} {
		_, err := ParseKey(bad)
		if err == nil {
			t.Errorf("ParseKey(%s) succeeded", name)
			continue
		}
		assertNoKeyMaterial(t, name, err.Error(), keyPEM)
	}
	ca := newTestCA(t)
	if _, err := ParseCertificatePEM(append(ca.CertificatePEM(), ca.CertificatePEM()...)); err == nil {
		t.Error("ParseCertificatePEM accepted two certificates")
	}
}
