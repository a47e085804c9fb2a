package nodetls

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ServerConfig is the node agent's TLS configuration for the connections
// Core opens to it. It presents nodeCert and requires a client certificate
// that caCert signed directly, that is valid now, has extended key usage
// ClientAuth and carries exactly urn:berth:core:<expectedCore>; anything else
// fails the handshake. expectedCore is the installation id (a canonical
// UUID) and must be caCert's installation. nodeCert must be a node
// certificate issued by caCert with its private key.
//
// Session tickets are disabled so that every connection is verified in full.
func ServerConfig(nodeCert tls.Certificate, caCert *x509.Certificate, expectedCore string) (*tls.Config, error) {
	installation, err := CAInstallationID(caCert)
	if err != nil {
		return nil, err
	}
	if err := checkID("expected Core installation id", expectedCore); err != nil {
		return nil, err
	}
	if expectedCore != installation {
		return nil, fmt.Errorf("nodetls: expected Core installation %s is not the CA's installation %s", expectedCore, installation)
	}
	if _, err := checkOwn(nodeCert, caCert, x509.ExtKeyUsageServerAuth, "node"); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{nodeCert},
		ClientAuth:             tls.RequireAnyClientCert, // verified in VerifyConnection
		SessionTicketsDisabled: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf, err := verifyPeer(cs.PeerCertificates, roots, x509.ExtKeyUsageClientAuth, "client")
			if err != nil {
				return err
			}
			id, err := CoreIdentity(leaf)
			if err != nil {
				return fmt.Errorf("nodetls: client certificate rejected: %w", err)
			}
			if id != expectedCore {
				return fmt.Errorf("nodetls: client certificate rejected: it is Core of installation %s, expected %s", id, expectedCore)
			}
			return nil
		},
	}, nil
}

// ClientConfig is Core's TLS configuration for dialing node expectedNodeID
// (a canonical UUID) at its advertised address. It always presents coreCert
// (Core's client certificate from IssueCore) and accepts only a server
// certificate that caCert signed directly, that is valid now, has extended
// key usage ServerAuth and carries exactly urn:berth:node:<expectedNodeID>.
// There are no system roots and no host-name check: the advertised address
// is not an identity. (InsecureSkipVerify is set only to switch off the
// standard, host-name-based verification; VerifyConnection replaces it.)
func ClientConfig(coreCert tls.Certificate, caCert *x509.Certificate, expectedNodeID string) (*tls.Config, error) {
	installation, err := CAInstallationID(caCert)
	if err != nil {
		return nil, err
	}
	if err := checkID("expected node id", expectedNodeID); err != nil {
		return nil, err
	}
	own, err := checkOwn(coreCert, caCert, x509.ExtKeyUsageClientAuth, "core")
	if err != nil {
		return nil, err
	}
	if own != installation {
		return nil, fmt.Errorf("nodetls: Core certificate is for installation %s, not the CA's installation %s", own, installation)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		MaxVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &coreCert, nil
		},
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf, err := verifyPeer(cs.PeerCertificates, roots, x509.ExtKeyUsageServerAuth, "server")
			if err != nil {
				return err
			}
			id, err := NodeIdentity(leaf)
			if err != nil {
				return fmt.Errorf("nodetls: server certificate rejected: %w", err)
			}
			if id != expectedNodeID {
				return fmt.Errorf("nodetls: server certificate rejected: it is node %s, expected node %s", id, expectedNodeID)
			}
			return nil
		},
	}, nil
}

// PinnedConfig is the node agent's TLS configuration for its first contact
// with Core, during enrollment, before it has the installation CA. It
// accepts only a server that presents, after its leaf, a CA certificate
// whose Fingerprint is exactly caFingerprint (from the enrollment token),
// and whose leaf that CA signed directly, is valid now, has extended key
// usage ServerAuth and carries urn:berth:core:<the CA's installation>. No
// client certificate is presented; the token authenticates the node.
func PinnedConfig(caFingerprint string) (*tls.Config, error) {
	if _, err := fingerprintHex(caFingerprint); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			certs := cs.PeerCertificates
			if len(certs) == 0 {
				return errors.New("nodetls: server presented no certificate")
			}
			var ca *x509.Certificate
			for _, c := range certs[1:] {
				if Fingerprint(c) == caFingerprint {
					ca = c
					break
				}
			}
			if ca == nil {
				return fmt.Errorf("nodetls: server did not present the pinned CA certificate %s", caFingerprint)
			}
			installation, err := CAInstallationID(ca)
			if err != nil {
				return fmt.Errorf("nodetls: pinned CA certificate rejected: %w", err)
			}
			if err := ca.CheckSignatureFrom(ca); err != nil {
				return errors.New("nodetls: pinned CA certificate is not self-signed")
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			leaf, err := verifyPeer(certs, roots, x509.ExtKeyUsageServerAuth, "server")
			if err != nil {
				return err
			}
			id, err := CoreIdentity(leaf)
			if err != nil {
				return fmt.Errorf("nodetls: server certificate rejected: %w", err)
			}
			if id != installation {
				return fmt.Errorf("nodetls: server certificate rejected: it is Core of installation %s, the pinned CA's is %s", id, installation)
			}
			return nil
		},
	}, nil
}

// EnrollmentServerConfig is Core's TLS configuration for its enrollment
// endpoint. coreServer must come from IssueCoreServer: a Core ServerAuth
// leaf for caCert's installation followed by caCert itself, which is what
// PinnedConfig looks for. No client certificate is requested.
func EnrollmentServerConfig(coreServer tls.Certificate, caCert *x509.Certificate) (*tls.Config, error) {
	installation, err := CAInstallationID(caCert)
	if err != nil {
		return nil, err
	}
	own, err := checkOwn(coreServer, caCert, x509.ExtKeyUsageServerAuth, "core")
	if err != nil {
		return nil, err
	}
	if own != installation {
		return nil, fmt.Errorf("nodetls: Core certificate is for installation %s, not the CA's installation %s", own, installation)
	}
	if len(coreServer.Certificate) != 2 || !slices.Equal(coreServer.Certificate[1], caCert.Raw) {
		return nil, errors.New("nodetls: Core enrollment certificate chain must be leaf + installation CA")
	}
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{coreServer},
		ClientAuth:             tls.NoClientCert,
		SessionTicketsDisabled: true,
	}, nil
}

// verifyPeer checks that the peer's leaf is an end-entity certificate signed
// directly by a certificate in roots (presented intermediates are ignored),
// valid now, with extended key usage eku.
func verifyPeer(certs []*x509.Certificate, roots *x509.CertPool, eku x509.ExtKeyUsage, role string) (*x509.Certificate, error) {
	if len(certs) == 0 {
		return nil, fmt.Errorf("nodetls: %s presented no certificate", role)
	}
	leaf := certs[0]
	if leaf.IsCA {
		return nil, fmt.Errorf("nodetls: %s certificate rejected: it is a CA certificate", role)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: time.Now(),
		KeyUsages:   []x509.ExtKeyUsage{eku},
	}); err != nil {
		return nil, fmt.Errorf("nodetls: %s certificate rejected: %w", role, err)
	}
	return leaf, nil
}

// checkOwn checks a local certificate before it is put in a configuration:
// it has a matching private key, caCert signed it, it has extended key
// usage eku and an identity of kind; it returns that identity.
func checkOwn(c tls.Certificate, caCert *x509.Certificate, eku x509.ExtKeyUsage, kind string) (string, error) {
	if len(c.Certificate) == 0 || c.PrivateKey == nil {
		return "", fmt.Errorf("nodetls: own %s certificate or its key is missing", kind)
	}
	leaf := c.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return "", fmt.Errorf("nodetls: parse own %s certificate: %w", kind, err)
		}
	}
	signer, ok := c.PrivateKey.(crypto.Signer)
	if !ok {
		return "", fmt.Errorf("nodetls: own %s key is not a signer", kind)
	}
	if pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return "", fmt.Errorf("nodetls: own %s key does not match its certificate", kind)
	}
	if err := leaf.CheckSignatureFrom(caCert); err != nil {
		return "", fmt.Errorf("nodetls: own %s certificate was not issued by the installation CA", kind)
	}
	if leaf.IsCA || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{eku}) {
		return "", fmt.Errorf("nodetls: own %s certificate does not have the expected key usage", kind)
	}
	id, err := identity(leaf, kind)
	if err != nil {
		return "", fmt.Errorf("nodetls: own %s certificate: %w", kind, err)
	}
	return id, nil
}
