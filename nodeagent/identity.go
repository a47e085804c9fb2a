package nodeagent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"berth.dev/platform/nodetls"
	"berth.dev/sandbox/atomicfile"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/redact"
	"berth.dev/sandbox/strictjson"
)

// Identity is the node's enrolled identity: its id, the installation it
// belongs to, its certificate and key, and the installation CA. It lives
// in the state directory as IdentityFile, mode 0600.
type Identity struct {
	NodeID         string
	InstallationID string
	CertificatePEM string
	KeyPEM         KeyPEM
	CAPEM          string
}

// identityFile is IdentityFile's content; the key is written out only
// here.
type identityFile struct {
	NodeID         string `json:"node_id"`
	InstallationID string `json:"installation_id"`
	CertificatePEM string `json:"certificate_pem"`
	KeyPEM         string `json:"key_pem"`
	CAPEM          string `json:"ca_pem"`
}

// Format never prints the key.
func (i Identity) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "Identity{NodeID:%s InstallationID:%s}", i.NodeID, i.InstallationID)
}

// KeyPEM is a private key in PEM: a secret. It prints as "[redacted]"
// (redact.String) with every fmt verb, through slog and through
// encoding/json; Reveal returns the text for the identity file and the TLS
// configuration.
type KeyPEM struct{ redact.String }

// NewKeyPEM returns s as a KeyPEM.
func NewKeyPEM(s string) KeyPEM { return KeyPEM{redact.NewString(s)} }

// SaveIdentity writes the identity file durably with mode 0600.
func (s *StateDir) SaveIdentity(id Identity) error {
	data, err := json.Marshal(identityFile{
		NodeID: id.NodeID, InstallationID: id.InstallationID,
		CertificatePEM: id.CertificatePEM, KeyPEM: id.KeyPEM.Reveal(), CAPEM: id.CAPEM,
	})
	if err != nil {
		return fmt.Errorf("encode identity: %w", err)
	}
	return atomicfile.Write(filepath.Join(s.path, IdentityFile), data, 0o600)
}

// LoadIdentity reads the identity file, refusing one that others can read.
func (s *StateDir) LoadIdentity() (Identity, error) {
	path := filepath.Join(s.path, IdentityFile)
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return Identity{}, fmt.Errorf("node is not enrolled: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("stat identity: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Identity{}, errdefs.Invalid("identity", "identity file must have mode 0600")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return Identity{}, errdefs.Invalid("identity", "identity file must be owned by the agent's user")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	var f identityFile
	if err := strictjson.Decode(data, &f, 64<<10); err != nil {
		return Identity{}, errdefs.Invalid("identity", "malformed identity file")
	}
	return Identity{
		NodeID: f.NodeID, InstallationID: f.InstallationID,
		CertificatePEM: f.CertificatePEM, KeyPEM: NewKeyPEM(f.KeyPEM), CAPEM: f.CAPEM,
	}, nil
}

// ServerTLS builds the node agent's mutual TLS configuration: it serves
// its node certificate and admits only Core's client certificate of its
// installation, signed by the installation CA.
func (i Identity) ServerTLS() (*tls.Config, *x509.Certificate, error) {
	ca, err := nodetls.ParseCertificatePEM([]byte(i.CAPEM))
	if err != nil {
		return nil, nil, errdefs.Invalid("identity.ca_pem", "not a certificate")
	}
	key, err := nodetls.ParseKey([]byte(i.KeyPEM.Reveal()))
	if err != nil {
		return nil, nil, errdefs.Invalid("identity.key_pem", "not a key")
	}
	leaf, err := nodetls.ParseCertificatePEM([]byte(i.CertificatePEM))
	if err != nil {
		return nil, nil, errdefs.Invalid("identity.certificate_pem", "not a certificate")
	}
	if got, err := nodetls.NodeIdentity(leaf); err != nil || got != i.NodeID {
		return nil, nil, errdefs.Invalid("identity.certificate_pem", "does not carry the node id")
	}
	cert, err := nodetls.TLSCertificate(leaf.Raw, key)
	if err != nil {
		return nil, nil, errdefs.Invalid("identity.key_pem", "does not match the certificate")
	}
	cfg, err := nodetls.ServerConfig(cert, ca, i.InstallationID)
	if err != nil {
		return nil, nil, fmt.Errorf("server TLS: %w", err)
	}
	return cfg, leaf, nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
