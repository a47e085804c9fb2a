package installation

import (
	"context"
	"errors"
	"time"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

// Installation is what GetInstallation reports.
type Installation struct {
	// ID is the installation's stable identity (a canonical UUID).
	ID string
	// PublicURL is Core's configured public URL.
	PublicURL string
	// CreateTime is when the identity was first claimed.
	CreateTime time.Time
	// OwnerEpoch is the serving Core's owner epoch.
	OwnerEpoch uint64
	// CAFingerprint is the lowercase hex SHA-256 of the CA certificate.
	CAFingerprint string
	// DeploymentGeneration is the current generation, 0 before a commit.
	DeploymentGeneration uint64
	// CoreVersion is the serving berth-core's build version.
	CoreVersion string
}

// Store is what the Service reads.
type Store interface {
	GetInstallation(ctx context.Context) (store.Installation, error)
	CurrentGeneration(ctx context.Context) (store.Generation, error)
}

// Service reads the installation.
type Service struct {
	st      Store
	epoch   uint64
	caFP    string
	version string
}

// New returns the Service of the Core serving under owner epoch epoch,
// with the CA of fingerprint caFingerprint (lowercase hex) and build
// version.
func New(st Store, epoch uint64, caFingerprint, version string) *Service {
	return &Service{st: st, epoch: epoch, caFP: caFingerprint, version: version}
}

// Get reads the installation and its current deployment generation.
func (s *Service) Get(ctx context.Context) (Installation, error) {
	i, err := s.st.GetInstallation(ctx)
	if err != nil {
		return Installation{}, err
	}
	var gen uint64
	switch g, err := s.st.CurrentGeneration(ctx); {
	case err == nil:
		gen = g.Generation
	case !errors.Is(err, errdefs.ErrNotFound):
		return Installation{}, err
	}
	return Installation{
		ID: i.ID.String(), PublicURL: i.PublicURL, CreateTime: i.CreatedAt, OwnerEpoch: s.epoch,
		CAFingerprint: s.caFP, DeploymentGeneration: gen, CoreVersion: s.version,
	}, nil
}
