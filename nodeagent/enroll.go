package nodeagent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"berth.dev/platform/enrollwire"
	"berth.dev/platform/nodetls"
	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"
	"berth.dev/sandbox/atomicfile"
	"berth.dev/sandbox/errdefs"
)

// pendingKeyFile holds the key of an enrollment in progress, written before
// Core is contacted, so that a node whose enrollment response was lost can
// retry with the same key and the same token.
const pendingKeyFile = "enroll-key.pem"

// Enroll enrolls the node once: it sends a CSR for its key and the token to
// Core at coreAddr (pinning the installation CA by the token's
// fingerprint), checks what comes back, and stores the identity. A node
// that is already enrolled is refused with ErrExists.
func Enroll(ctx context.Context, state *StateDir, coreAddr, tokenText, advertise string) (Identity, error) {
	if _, err := state.LoadIdentity(); err == nil {
		return Identity{}, fmt.Errorf("enroll: node is already enrolled: %w", errdefs.ErrExists)
	} else if !errdefs.IsNotFound(err) {
		return Identity{}, fmt.Errorf("enroll: %w", err)
	}
	tok, err := nodetls.ParseToken(strings.TrimSpace(tokenText))
	if err != nil {
		return Identity{}, errdefs.Invalid("token", "not an enrollment token")
	}
	key, keyPEM, err := state.pendingKey()
	if err != nil {
		return Identity{}, fmt.Errorf("enroll: key: %w", err)
	}
	// The CSR's id is a placeholder: Core assigns the node id and signs
	// only that.
	csr, err := nodetls.NewCSR(key, uuid.NewString())
	if err != nil {
		return Identity{}, fmt.Errorf("enroll: csr: %w", err)
	}
	tlsCfg, err := nodetls.PinnedConfig(tok.CAFingerprint())
	if err != nil {
		return Identity{}, errdefs.Invalid("token", "malformed CA fingerprint")
	}
	var pin pinCheck
	cc, err := grpc.NewClient(coreAddr, grpc.WithTransportCredentials(credentials.NewTLS(pin.wrap(tlsCfg))))
	if err != nil {
		return Identity{}, errdefs.Invalid("core", "cannot dial")
	}
	defer cc.Close()
	resp, err := enrollmentv1.NewEnrollmentServiceClient(cc).Enroll(ctx, &enrollmentv1.EnrollRequest{
		Token: strings.TrimSpace(tokenText), CsrDer: csr, AdvertiseAddress: advertise,
	})
	if err != nil {
		return Identity{}, enrollErr(err, pin.refused.Load())
	}
	id, err := checkEnrollment(resp, tok, key.Public().(*ecdsa.PublicKey), keyPEM)
	if err != nil {
		return Identity{}, err
	}
	if err := state.SaveIdentity(id); err != nil {
		return Identity{}, fmt.Errorf("enroll: save identity: %w", err)
	}
	_ = os.Remove(filepath.Join(state.path, pendingKeyFile))
	return id, nil
}

// pendingKey loads the key of an earlier attempt or creates and persists a
// new one.
func (s *StateDir) pendingKey() (key *ecdsa.PrivateKey, keyPEM []byte, err error) {
	path := filepath.Join(s.path, pendingKeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		signer, err := nodetls.NewNodeKey()
		if err != nil {
			return nil, nil, err
		}
		if data, err = nodetls.MarshalKey(signer); err != nil {
			return nil, nil, err
		}
		if err := atomicfile.Write(path, data, 0o600); err != nil {
			return nil, nil, err
		}
	} else if err != nil {
		return nil, nil, err
	}
	signer, err := nodetls.ParseKey(data)
	if err != nil {
		return nil, nil, errdefs.Invalid("enroll_key", "malformed pending key")
	}
	ec, ok := signer.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errdefs.Invalid("enroll_key", "not an ECDSA key")
	}
	return ec, data, nil
}

// checkEnrollment verifies Core's answer: the CA is the pinned one, the
// certificate is signed by it for exactly the returned node id and for our
// key, and the installation matches the CA.
func checkEnrollment(resp *enrollmentv1.EnrollResponse, tok nodetls.Token, pub *ecdsa.PublicKey, keyPEM []byte) (Identity, error) {
	bad := func(reason string) error {
		return fmt.Errorf("enroll: Core's answer %s: %w", reason, errdefs.ErrInvalid)
	}
	ca, err := x509.ParseCertificate(resp.GetCaCertificateDer())
	if err != nil || nodetls.Fingerprint(ca) != tok.CAFingerprint() {
		return Identity{}, bad("carries another CA than the token pins")
	}
	cert, err := x509.ParseCertificate(resp.GetCertificateDer())
	if err != nil || cert.CheckSignatureFrom(ca) != nil {
		return Identity{}, bad("has a certificate the CA did not sign")
	}
	if id, err := nodetls.NodeIdentity(cert); err != nil || id != resp.GetNodeId() {
		return Identity{}, bad("names another node than its certificate")
	}
	if certPub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !certPub.Equal(pub) {
		return Identity{}, bad("certifies another key")
	}
	if inst, err := nodetls.CAInstallationID(ca); err != nil || inst != resp.GetInstallationId() {
		return Identity{}, bad("names another installation than its CA")
	}
	return Identity{
		NodeID:         resp.GetNodeId(),
		InstallationID: resp.GetInstallationId(),
		CertificatePEM: string(pemBlock("CERTIFICATE", cert.Raw)),
		KeyPEM:         NewKeyPEM(string(bytes.TrimSpace(keyPEM)) + "\n"),
		CAPEM:          string(pemBlock("CERTIFICATE", ca.Raw)),
	}, nil
}

// errTokenRejected is Core's refusal of the token, whichever check
// refused it.
var errTokenRejected = fmt.Errorf("enrollment token rejected: %w", errdefs.ErrFenced)

// codec reads Core's answers to Enroll: enrollment's one table
// (platform/enrollwire, the one Core encodes with), its token refusal read
// as errTokenRejected.
var codec = enrollwire.Codec(errTokenRejected)

// pinCheck records that the pinned-CA check refused Core's certificate.
// grpc-go reports a failed handshake only as UNAVAILABLE with text, never
// its cause, so the check itself says so.
type pinCheck struct{ refused atomic.Bool }

// wrap makes cfg's connection check record a refusal in p.
func (p *pinCheck) wrap(cfg *tls.Config) *tls.Config {
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		err := verify(cs)
		if err != nil {
			p.refused.Store(true)
		}
		return err
	}
	return cfg
}

// enrollErr turns Core's answer into a class without its text: a
// refused pin is fenced; a status in enrollment's codec form is its
// class; anything else (a transport failure, a status of another form,
// Core's internal error) is no answer, and the same token may be retried.
func enrollErr(err error, pinRefused bool) error {
	if pinRefused {
		return fmt.Errorf("enroll: Core's certificate does not chain to the CA the token pins: %w", errdefs.ErrFenced)
	}
	d, ok := codec.Decode(status.Convert(err))
	switch class := d.Row.Class; {
	case !ok || class == nil:
		return fmt.Errorf("enroll: no answer from Core (retry with the same token): %w", errdefs.ErrObservationUnavailable)
	case errors.Is(class, errdefs.ErrFenced):
		return fmt.Errorf("enroll: Core rejected the token: %w", errdefs.ErrFenced)
	case errors.Is(class, errdefs.ErrInvalid):
		return fmt.Errorf("enroll: Core rejected the request: %w", errdefs.ErrInvalid)
	default:
		return fmt.Errorf("enroll: Core refused the enrollment: %w", class)
	}
}
