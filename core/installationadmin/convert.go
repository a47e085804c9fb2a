package installationadmin

import (
	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/admin"
	"berth.dev/core/installation"
)

// installationProto is the API form of the installation.
func installationProto(inst installation.Installation) *adminv1.Installation {
	return &adminv1.Installation{
		Name:                 admin.InstallationName.Format(),
		Id:                   inst.ID,
		PublicUrl:            inst.PublicURL,
		OwnerEpoch:           inst.OwnerEpoch,
		CaFingerprint:        inst.CAFingerprint,
		DeploymentGeneration: inst.DeploymentGeneration,
		CoreVersion:          inst.CoreVersion,
		CreateTime:           admin.Timestamp(&inst.CreateTime),
	}
}
