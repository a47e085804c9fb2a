// Package installationadmin is the thin gRPC adapter of
// berth.admin.v1.InstallationService over core/installation, for
// admin.Options.Installation. It only converts the request's name and the
// result; the admin server converts errors once.
package installationadmin

import (
	"context"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/admin"
	"berth.dev/core/installation"
)

// Reader is the logic the adapter serves.
type Reader interface {
	Get(ctx context.Context) (installation.Installation, error)
}

// NewServer returns r as berth.admin.v1.InstallationService.
func NewServer(r Reader) adminv1.InstallationServiceServer { return &server{read: r} }

type server struct {
	adminv1.UnimplementedInstallationServiceServer
	read Reader
}

func (s *server) GetInstallation(ctx context.Context, req *adminv1.GetInstallationRequest) (*adminv1.GetInstallationResponse, error) {
	if _, err := admin.ValidateName("name", req.GetName(), admin.InstallationName); err != nil {
		return nil, err
	}
	inst, err := s.read.Get(ctx)
	if err != nil {
		return nil, err
	}
	pb := &adminv1.Installation{
		Name:                 admin.InstallationName.Format(),
		Id:                   inst.ID,
		PublicUrl:            inst.PublicURL,
		OwnerEpoch:           inst.OwnerEpoch,
		CaFingerprint:        inst.CAFingerprint,
		DeploymentGeneration: inst.DeploymentGeneration,
		CoreVersion:          inst.CoreVersion,
		CreateTime:           admin.Timestamp(&inst.CreateTime),
	}
	return &adminv1.GetInstallationResponse{Installation: pb}, nil
}
