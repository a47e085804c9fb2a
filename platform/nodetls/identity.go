package nodetls

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// URI prefixes of the identities carried as URI SANs.
const (
	nodeURIPrefix         = "urn:berth:node:"
	coreURIPrefix         = "urn:berth:core:"
	installationURIPrefix = "urn:berth:installation:"
)

// NodeURI is the URI SAN of node nodeID.
func NodeURI(nodeID string) string { return nodeURIPrefix + nodeID }

// CoreURI is the URI SAN of Core of installation installationID.
func CoreURI(installationID string) string { return coreURIPrefix + installationID }

// ValidID reports whether s is a canonical UUID: lowercase 8-4-4-4-12 hex
// and not the nil UUID. Node ids and installation ids must be canonical.
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	nonZero := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
			continue
		}
		switch {
		case c >= '0' && c <= '9':
			if c != '0' {
				nonZero = true
			}
		case c >= 'a' && c <= 'f':
			nonZero = true
		default:
			return false
		}
	}
	return nonZero
}

func checkID(what, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("nodetls: %s %q is not a canonical UUID", what, id)
	}
	return nil
}

// NodeIdentity returns the node id of a node certificate: the certificate
// must carry exactly one URI SAN, urn:berth:node:<canonical-uuid>.
func NodeIdentity(cert *x509.Certificate) (string, error) {
	return identity(cert, "node")
}

// CoreIdentity returns the installation id of a Core certificate: the
// certificate must carry exactly one URI SAN,
// urn:berth:core:<canonical-uuid>.
func CoreIdentity(cert *x509.Certificate) (string, error) {
	return identity(cert, "core")
}

// CAInstallationID returns the installation id of an installation CA
// certificate (a CA certificate carrying exactly one URI SAN,
// urn:berth:installation:<canonical-uuid>). It does not check validity
// periods or signatures.
func CAInstallationID(caCert *x509.Certificate) (string, error) {
	if caCert == nil {
		return "", errors.New("nodetls: no CA certificate")
	}
	if !caCert.BasicConstraintsValid || !caCert.IsCA {
		return "", errors.New("nodetls: certificate is not a CA certificate")
	}
	return identity(caCert, "installation")
}

// identity parses the single berth URI SAN of cert and checks its kind.
func identity(cert *x509.Certificate, kind string) (string, error) {
	if cert == nil {
		return "", errors.New("nodetls: no certificate")
	}
	if len(cert.URIs) != 1 {
		return "", fmt.Errorf("nodetls: certificate carries %d URI SANs, want exactly one berth %s URI", len(cert.URIs), kind)
	}
	gotKind, id, err := parseBerthURI(cert.URIs[0])
	if err != nil {
		return "", err
	}
	if gotKind != kind {
		return "", fmt.Errorf("nodetls: certificate identifies a berth %s, want a berth %s", gotKind, kind)
	}
	return id, nil
}

// parseBerthURI splits urn:berth:<kind>:<uuid>. Anything else (a host, a
// path, a query, a fragment, user info, an unknown kind, a non-canonical
// UUID) is refused.
func parseBerthURI(u *url.URL) (kind, id string, err error) {
	if u == nil || u.Scheme != "urn" || u.Opaque == "" || u.Host != "" || u.Path != "" ||
		u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "" {
		return "", "", errors.New("nodetls: certificate URI SAN is not a berth identity")
	}
	rest, ok := strings.CutPrefix(u.Opaque, "berth:")
	if !ok {
		return "", "", errors.New("nodetls: certificate URI SAN is not a berth identity")
	}
	kind, id, ok = strings.Cut(rest, ":")
	if !ok {
		return "", "", errors.New("nodetls: certificate URI SAN is not a berth identity")
	}
	switch kind {
	case "node", "core", "installation":
	default:
		return "", "", fmt.Errorf("nodetls: certificate URI SAN has unknown berth identity kind %q", kind)
	}
	if !ValidID(id) {
		return "", "", fmt.Errorf("nodetls: certificate berth %s identity %q is not a canonical UUID", kind, id)
	}
	return kind, id, nil
}
