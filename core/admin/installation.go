package admin

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
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

// InstallationReader reads the installation for GetInstallation; Core
// passes a function over its store. Its errors are errdefs classes.
type InstallationReader func(ctx context.Context) (Installation, error)

// installationService serves berth.admin.v1.InstallationService.
type installationService struct {
	adminv1.UnimplementedInstallationServiceServer
	read InstallationReader
}

func (s *installationService) GetInstallation(ctx context.Context, req *adminv1.GetInstallationRequest) (*adminv1.GetInstallationResponse, error) {
	if _, err := ValidateName("name", req.GetName(), InstallationName); err != nil {
		return nil, err
	}
	inst, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetInstallationResponse{Installation: &adminv1.Installation{
		Name:                 InstallationName.Format(),
		Id:                   inst.ID,
		PublicUrl:            inst.PublicURL,
		CreateTime:           timestamp(inst.CreateTime),
		OwnerEpoch:           inst.OwnerEpoch,
		CaFingerprint:        inst.CAFingerprint,
		DeploymentGeneration: inst.DeploymentGeneration,
		CoreVersion:          inst.CoreVersion,
	}}, nil
}

// timestamp converts t, leaving the zero time unset.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
