package nodetls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// NewCSR returns a DER certificate signing request for node nodeID signed by
// key (an ECDSA P-256 key from NewNodeKey). The CA ignores everything in it
// but the public key and the signature; the subject and URI SAN are set only
// so that the request is self-describing.
func NewCSR(key crypto.Signer, nodeID string) ([]byte, error) {
	if err := checkID("node id", nodeID); err != nil {
		return nil, err
	}
	if !isP256(key.Public()) {
		return nil, errors.New("nodetls: node key is not ECDSA P-256")
	}
	uri, err := url.Parse(NodeURI(nodeID))
	if err != nil {
		return nil, fmt.Errorf("nodetls: node URI: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{Organization: []string{"Berth"}, CommonName: "Berth node " + nodeID},
		URIs:    []*url.URL{uri},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("nodetls: create CSR: %w", err)
	}
	return der, nil
}

// SignNodeCSR issues node nodeID's certificate for the public key of csrDER.
// The CSR's signature must verify and its key must be ECDSA P-256; its
// subject, SANs and extensions are ignored. The certificate carries exactly
// the URI SAN urn:berth:node:<nodeID>, extended key usage ServerAuth only
// (Core dials nodes; see the package documentation), a random 128-bit
// serial, and validity from now-5m (but not before the CA's NotBefore) to
// now+validity, where 0 < validity <= MaxLeafValidity and the end is not
// past the CA's own expiry. The caller (Core's enrollment service) decides
// nodeID; the CSR cannot choose it.
func (ca *CA) SignNodeCSR(csrDER []byte, nodeID string, now time.Time, validity time.Duration) ([]byte, error) {
	if err := checkID("node id", nodeID); err != nil {
		return nil, err
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, fmt.Errorf("nodetls: parse CSR: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, errors.New("nodetls: CSR signature does not verify")
	}
	if !isP256(csr.PublicKey) {
		return nil, errors.New("nodetls: CSR public key is not ECDSA P-256")
	}
	return ca.issue(csr.PublicKey, "Berth node "+nodeID, NodeURI(nodeID), "", x509.ExtKeyUsageServerAuth, now, validity)
}

// IssueCore issues Core's client certificate for dialing nodes, with a fresh
// ECDSA P-256 key: URI SAN urn:berth:core:<installationID>, extended key
// usage ClientAuth only. installationID must be the CA's installation.
func (ca *CA) IssueCore(installationID string, now time.Time, validity time.Duration) (tls.Certificate, error) {
	return ca.issueCore(installationID, "", x509.ExtKeyUsageClientAuth, now, validity)
}

// IssueCoreServer issues the certificate of Core's enrollment endpoint, with a
// fresh ECDSA P-256 key: URI SAN urn:berth:core:<installationID>, extended
// key usage ServerAuth only, and no DNS or IP SANs (an enrolling node checks
// the pinned CA, not a host name). The returned chain is leaf + CA
// certificate, as PinnedConfig requires.
func (ca *CA) IssueCoreServer(installationID string, now time.Time, validity time.Duration) (tls.Certificate, error) {
	c, err := ca.issueCore(installationID, "", x509.ExtKeyUsageServerAuth, now, validity)
	if err != nil {
		return tls.Certificate{}, err
	}
	c.Certificate = append(c.Certificate, ca.cert.Raw)
	return c, nil
}

// IssueRuntimeGateway issues the certificate of Core's Runtime gateway
// when the operator gives none, with a fresh ECDSA P-256 key: URI SAN
// urn:berth:core:<installationID>, one IP SAN (host is an IP address) or
// DNS SAN (a name) for the host of the installation's public URL, and
// extended key usage ServerAuth only. A Runtime trusts it through the CA
// certificate its adapter places beside the bootstrap file
// (runtimebootstrap.CAPath), and checks the host name as usual. The
// returned chain is leaf + CA certificate.
func (ca *CA) IssueRuntimeGateway(installationID, host string, now time.Time, validity time.Duration) (tls.Certificate, error) {
	if host == "" || len(host) > 253 {
		return tls.Certificate{}, errors.New("nodetls: runtime gateway host must be 1 to 253 bytes")
	}
	c, err := ca.issueCore(installationID, host, x509.ExtKeyUsageServerAuth, now, validity)
	if err != nil {
		return tls.Certificate{}, err
	}
	c.Certificate = append(c.Certificate, ca.cert.Raw)
	return c, nil
}

func (ca *CA) issueCore(installationID, host string, eku x509.ExtKeyUsage, now time.Time, validity time.Duration) (tls.Certificate, error) {
	if err := checkID("installation id", installationID); err != nil {
		return tls.Certificate{}, err
	}
	if installationID != ca.installationID {
		return tls.Certificate{}, fmt.Errorf("nodetls: installation %s is not the CA's installation %s", installationID, ca.installationID)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("nodetls: generate key: %w", err)
	}
	der, err := ca.issue(key.Public(), "Berth core "+installationID, CoreURI(installationID), host, eku, now, validity)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("nodetls: parse issued certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// issue signs a leaf certificate for pub carrying exactly one URI SAN and,
// when host is not empty, one IP or DNS SAN for it.
func (ca *CA) issue(pub crypto.PublicKey, commonName, uri, host string, eku x509.ExtKeyUsage, now time.Time, validity time.Duration) ([]byte, error) {
	if ca == nil || ca.cert == nil || ca.key == nil {
		return nil, errors.New("nodetls: no CA")
	}
	if now.IsZero() {
		return nil, errors.New("nodetls: zero issuance time")
	}
	if validity <= 0 || validity > MaxLeafValidity {
		return nil, fmt.Errorf("nodetls: validity %s is outside (0, %s]", validity, MaxLeafValidity)
	}
	notBefore, notAfter := now.Add(-clockSkew), now.Add(validity)
	if notBefore.Before(ca.cert.NotBefore) {
		notBefore = ca.cert.NotBefore
	}
	if now.Before(ca.cert.NotBefore) || notAfter.After(ca.cert.NotAfter) {
		return nil, fmt.Errorf("nodetls: validity [%s, %s] is outside the CA's [%s, %s]",
			now.UTC().Format(time.RFC3339), notAfter.UTC().Format(time.RFC3339),
			ca.cert.NotBefore.UTC().Format(time.RFC3339), ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("nodetls: identity URI: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"Berth"}, CommonName: commonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{eku},
		BasicConstraintsValid: true,
		IsCA:                  false,
		URIs:                  []*url.URL{u},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else if host != "" {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key())
	if err != nil {
		return nil, fmt.Errorf("nodetls: sign certificate: %w", err)
	}
	return der, nil
}

// TLSCertificate pairs an issued certificate (DER, as SignNodeCSR returns
// it) with its private key, checking that they belong together.
func TLSCertificate(certDER []byte, key crypto.Signer) (tls.Certificate, error) {
	leaf, err := x509.ParseCertificate(certDER)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("nodetls: parse certificate: %w", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return tls.Certificate{}, errors.New("nodetls: private key does not match the certificate")
	}
	return tls.Certificate{Certificate: [][]byte{certDER}, PrivateKey: key, Leaf: leaf}, nil
}

func isP256(pub crypto.PublicKey) bool {
	k, ok := pub.(*ecdsa.PublicKey)
	return ok && k.Curve == elliptic.P256()
}
