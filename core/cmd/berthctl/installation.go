package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

func (a *app) installationCmd() *cobra.Command {
	return a.groupCmd("installation", "Show the installation this Core serves (InstallationService)", a.installationGetCmd())
}

func (a *app) installationGetCmd() *cobra.Command {
	return a.command("get", "Show the installation: its id, public URL, owner epoch, CA fingerprint, generation and Core's version", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		resp, err := call(a.installation.GetInstallation, &adminv1.GetInstallationRequest{Name: "installation"})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) {
			in := resp.GetInstallation()
			field(w, "ID", in.GetId())
			field(w, "PUBLIC URL", dash(in.GetPublicUrl()))
			field(w, "CREATED", ts(in.GetCreateTime()))
			field(w, "OWNER EPOCH", fmt.Sprint(in.GetOwnerEpoch()))
			field(w, "CA FINGERPRINT", dash(in.GetCaFingerprint()))
			field(w, "DEPLOYMENT GENERATION", fmt.Sprint(in.GetDeploymentGeneration()))
			field(w, "CORE VERSION", dash(in.GetCoreVersion()))
		})
	})
}
