package nodetls

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/url"
	"strings"
	"time"
)

const (
	// CAValidityYears is the installation CA's validity period.
	CAValidityYears = 10
	// MaxLeafValidity bounds the validity of every leaf certificate the CA
	// issues.
	MaxLeafValidity = 365 * 24 * time.Hour
	// clockSkew backdates NotBefore so that a peer whose clock is slightly
	// behind accepts a freshly issued certificate.
	clockSkew = 5 * time.Minute

	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY"
)

// CA is an installation CA: its certificate and its private key. Format and
// String never print the key, and it is hidden from fmt's reflection too
// (see hidden).
type CA struct {
	cert           *x509.Certificate
	key            hidden[*ecdsa.PrivateKey]
	installationID string
}

// NewCA creates the installation CA of installationID (a canonical UUID): a
// fresh ECDSA P-256 key and a self-signed certificate with CA:true, path
// length 0, key usage CertSign|CRLSign, valid from now for CAValidityYears
// years, subject "Berth installation CA <id>" and the URI SAN
// urn:berth:installation:<id>.
func NewCA(installationID string, now time.Time) (*CA, error) {
	if err := checkID("installation id", installationID); err != nil {
		return nil, err
	}
	if now.IsZero() {
		return nil, errors.New("nodetls: zero issuance time")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("nodetls: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	uri, err := url.Parse(installationURIPrefix + installationID)
	if err != nil {
		return nil, fmt.Errorf("nodetls: CA URI: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{"Berth"},
			CommonName:   "Berth installation CA " + installationID,
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.AddDate(CAValidityYears, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		URIs:                  []*url.URL{uri},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("nodetls: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("nodetls: parse CA certificate: %w", err)
	}
	return &CA{cert: cert, key: hide(key), installationID: installationID}, nil
}

// Certificate returns the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// InstallationID returns the installation the CA belongs to.
func (ca *CA) InstallationID() string { return ca.installationID }

// Fingerprint returns Fingerprint(ca.Certificate()).
func (ca *CA) Fingerprint() string { return Fingerprint(ca.cert) }

// CertificatePEM returns the CA certificate PEM-encoded. It is public.
func (ca *CA) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: ca.cert.Raw})
}

// String identifies the CA without its key.
func (ca *CA) String() string {
	if ca == nil || ca.cert == nil {
		return "nodetls.CA(<nil>)"
	}
	return fmt.Sprintf("nodetls.CA(installation %s, %s, key redacted)", ca.installationID, Fingerprint(ca.cert))
}

// Format prints String for every verb, so that %v, %+v and %#v never reach
// the private key.
func (ca *CA) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(ca.String())) }

// GoString is String.
func (ca *CA) GoString() string { return ca.String() }

// LogValue is String, so slog's handlers never reach the key either.
func (ca *CA) LogValue() slog.Value { return slog.StringValue(ca.String()) }

// MarshalCA encodes the CA for Core's store: the certificate PEM (public) and
// the private key as PKCS #8 PEM. keyPEM is a secret: Core's store must keep
// it encrypted at rest and never log it.
func MarshalCA(ca *CA) (certPEM, keyPEM []byte, err error) {
	if ca == nil || ca.cert == nil || ca.key == nil {
		return nil, nil, errors.New("nodetls: no CA to marshal")
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.key())
	if err != nil {
		return nil, nil, errors.New("nodetls: CA key cannot be encoded")
	}
	return ca.CertificatePEM(), pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// ParseCA decodes MarshalCA's output. It checks that the certificate is a
// self-signed Berth installation CA with path length 0 and that the key is
// the ECDSA P-256 key of that certificate. Errors never include key
// material.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificatePEM(certPEM)
	if err != nil {
		return nil, err
	}
	id, err := CAInstallationID(cert)
	if err != nil {
		return nil, err
	}
	if cert.MaxPathLen != 0 || !cert.MaxPathLenZero {
		return nil, errors.New("nodetls: CA certificate does not have path length 0")
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("nodetls: CA certificate lacks the certificate-signing key usage")
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		return nil, errors.New("nodetls: CA certificate is not self-signed")
	}
	key, err := parseP256Key(keyPEM, "CA key")
	if err != nil {
		return nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("nodetls: CA key does not match the CA certificate")
	}
	return &CA{cert: cert, key: hide(key), installationID: id}, nil
}

// ParseCertificatePEM decodes exactly one PEM CERTIFICATE block.
func ParseCertificatePEM(certPEM []byte) (*x509.Certificate, error) {
	block, rest := pem.Decode(certPEM)
	if block == nil || block.Type != pemCertificate || len(block.Headers) != 0 {
		return nil, errors.New("nodetls: not a PEM certificate")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("nodetls: trailing data after the PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("nodetls: parse certificate: %w", err)
	}
	return cert, nil
}

// NewNodeKey generates a node's private key (ECDSA P-256).
func NewNodeKey() (crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("nodetls: generate key: %w", err)
	}
	return key, nil
}

// MarshalKey encodes an ECDSA P-256 private key as PKCS #8 PEM, for the node
// agent to persist (mode 0600). The output is a secret.
func MarshalKey(key crypto.Signer) ([]byte, error) {
	k, ok := key.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("nodetls: key is not an ECDSA P-256 private key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, errors.New("nodetls: key cannot be encoded")
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// ParseKey decodes MarshalKey's output. Errors never include key material.
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	return parseP256Key(keyPEM, "key")
}

// parseP256Key decodes one PKCS #8 PEM ECDSA P-256 key. Underlying parser
// errors are not wrapped so that nothing derived from the key's bytes can
// reach an error message.
func parseP256Key(keyPEM []byte, what string) (*ecdsa.PrivateKey, error) {
	block, rest := pem.Decode(keyPEM)
	if block == nil || block.Type != pemPrivateKey || len(block.Headers) != 0 {
		return nil, fmt.Errorf("nodetls: %s is not a PEM PKCS #8 private key", what)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("nodetls: trailing data after the %s", what)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("nodetls: %s is not a valid PKCS #8 private key", what)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("nodetls: %s is not an ECDSA P-256 key", what)
	}
	return key, nil
}

// Fingerprint is "sha256:" followed by the lowercase hex SHA-256 of the
// certificate's DER encoding.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fingerprintHex returns the hex part of a well-formed fingerprint.
func fingerprintHex(fp string) (string, error) {
	h, ok := strings.CutPrefix(fp, "sha256:")
	if !ok || !isLowerHex(h, sha256.Size*2) {
		return "", fmt.Errorf("nodetls: CA fingerprint %q is not sha256:<64 lowercase hex digits>", fp)
	}
	return h, nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	var b [16]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("nodetls: serial number: %w", err)
		}
		if n := new(big.Int).SetBytes(b[:]); n.Sign() > 0 {
			return n, nil
		}
	}
}
