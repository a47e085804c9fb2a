package enrollment

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/google/uuid"

	"berth.dev/platform/nodetls"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

// Store is what enrollment reads and writes.
type Store interface {
	ConsumeEnrollmentToken(ctx context.Context, id string, secretHash []byte, nodeID uuid.UUID, publicKeyHash []byte) (store.ConsumeResult, error)
	CreateNode(ctx context.Context, id uuid.UUID, address string, certDER []byte, fingerprint string, publicKeyHash []byte) (store.Node, error)
	GetNode(ctx context.Context, id uuid.UUID) (store.Node, error)
}

// CertificateValidity is how long a node certificate is valid.
const CertificateValidity = 180 * 24 * time.Hour

// ErrRejected is the one refusal of an enrollment, whichever check failed.
var ErrRejected = fmt.Errorf("enrollment rejected: %w", errdefs.ErrFenced)

// Result is an enrolled node's identity.
type Result struct {
	NodeID         uuid.UUID
	InstallationID string
	CertificateDER []byte
	CADER          []byte
	// Replayed is true when this answers a retry of an earlier enrollment.
	Replayed bool
}

// Service enrolls nodes.
type Service struct {
	store Store
	ca    *nodetls.CA
	now   func() time.Time
	newID func() uuid.UUID
}

// NewService returns the enrollment service of the installation whose CA is
// ca. now and newID are the clock and id source.
func NewService(st Store, ca *nodetls.CA, now func() time.Time, newID func() uuid.UUID) *Service {
	return &Service{store: st, ca: ca, now: now, newID: newID}
}

// Enroll checks the token against the store (hash, single use, expiry and
// revocation on the database clock), signs the CSR for the node id and
// records the node.
func (s *Service) Enroll(ctx context.Context, tokenText string, csrDER []byte, address string) (Result, error) {
	tok, err := nodetls.ParseToken(tokenText)
	if err != nil {
		return Result{}, errdefs.Invalid("token", "not an enrollment token")
	}
	if tok.CAFingerprint() != s.ca.Fingerprint() {
		return Result{}, ErrRejected
	}
	if host, port, err := net.SplitHostPort(address); err != nil || host == "" || port == "" || len(address) > 255 {
		return Result{}, errdefs.Invalid("advertise_address", "must be host:port")
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil || csr.CheckSignature() != nil {
		return Result{}, errdefs.Invalid("csr_der", "not a signed certificate request")
	}
	pubDER, err := x509.MarshalPKIXPublicKey(csr.PublicKey)
	if err != nil {
		return Result{}, errdefs.Invalid("csr_der", "unsupported public key")
	}
	pubHash := sha256.Sum256(pubDER)

	consumed, err := s.store.ConsumeEnrollmentToken(ctx, tok.ID(), tok.SecretHash(), s.newID(), pubHash[:])
	if err != nil {
		if errors.Is(err, store.ErrEnrollmentRejected) {
			return Result{}, ErrRejected
		}
		return Result{}, fmt.Errorf("enroll: %w", err)
	}
	if consumed.Replayed {
		node, err := s.store.GetNode(ctx, consumed.NodeID)
		switch {
		case err == nil:
			if node.State == store.NodeRetired || node.State == store.NodeRemoved {
				return Result{}, ErrRejected
			}
			return s.result(node, true), nil
		case !errdefs.IsNotFound(err):
			return Result{}, fmt.Errorf("enroll: %w", err)
		}
		// The token was consumed but the node never recorded (Core stopped
		// in between): finish the same enrollment now.
	}
	certDER, err := s.ca.SignNodeCSR(csrDER, consumed.NodeID.String(), s.now(), CertificateValidity)
	if err != nil {
		return Result{}, errdefs.Invalid("csr_der", "cannot be signed")
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return Result{}, fmt.Errorf("enroll: parse issued certificate: %w", err)
	}
	node, err := s.store.CreateNode(ctx, consumed.NodeID, address, certDER, nodetls.Fingerprint(cert), pubHash[:])
	if err != nil {
		return Result{}, fmt.Errorf("enroll: record node: %w", err)
	}
	return s.result(node, consumed.Replayed), nil
}

func (s *Service) result(n store.Node, replayed bool) Result {
	return Result{
		NodeID:         n.ID,
		InstallationID: s.ca.InstallationID(),
		CertificateDER: n.CertificateDER,
		CADER:          s.ca.Certificate().Raw,
		Replayed:       replayed,
	}
}
