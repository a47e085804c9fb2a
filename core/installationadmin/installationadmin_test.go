package installationadmin_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/installation"
	"berth.dev/core/installationadmin"
)

// reader returns a fixed installation or error: the adapter is tested
// for its conversion; the logic has its own tests on a real database.
type reader struct {
	inst installation.Installation
	err  error
}

func (r reader) Get(context.Context) (installation.Installation, error) { return r.inst, r.err }

func TestGetInstallationConverts(t *testing.T) {
	inst := installation.Installation{
		ID: "0b0e4c5e-7f6a-4b55-9a43-3f4c2f1d9e10", PublicURL: "https://core.example:7443",
		CreateTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), OwnerEpoch: 7, CAFingerprint: "abab",
		DeploymentGeneration: 3, CoreVersion: "dev",
	}
	cc, token := admintest.Serve(t, admin.Options{Services: []admin.Service{installationadmin.New(reader{inst: inst})}})
	client := adminv1.NewInstallationServiceClient(cc)
	ctx := admintest.Authed(t.Context(), token)

	resp, err := client.GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
	errdefstest.Must(t, err)
	got := resp.GetInstallation()
	if got.GetName() != "installation" || got.GetId() != inst.ID || got.GetPublicUrl() != inst.PublicURL ||
		!got.GetCreateTime().AsTime().Equal(inst.CreateTime) || got.GetOwnerEpoch() != 7 ||
		got.GetCaFingerprint() != "abab" || got.GetDeploymentGeneration() != 3 || got.GetCoreVersion() != "dev" {
		t.Fatalf("installation %v", got)
	}
	_, err = client.GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installations/x"})
	admintest.WantInvalidField(t, err, "name")

	cc, token = admintest.Serve(t, admin.Options{Services: []admin.Service{installationadmin.New(reader{err: errdefs.ErrObservationUnavailable})}})
	_, err = adminv1.NewInstallationServiceClient(cc).GetInstallation(admintest.Authed(t.Context(), token), &adminv1.GetInstallationRequest{Name: "installation"})
	admintest.WantStatus(t, err, codes.Unavailable, admin.ReasonObservationUnavailable)
}
