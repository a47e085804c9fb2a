package projectadmin_test

import (
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestGRPCProjectLimitsAndUsage: limits are set on CreateProject and
// changed by UpdateProject one mask path at a time (a path named with the
// limit unset removes it), every answer carries the usage, a retry with
// other limits is ALREADY_EXISTS, and a negative limit, a set usage or a
// mask naming anything else is INVALID_ARGUMENT naming the field.
func TestGRPCProjectLimitsAndUsage(t *testing.T) {
	f := newFixture(t)
	ten := f.tenant(t, "team")
	req := &adminv1.CreateProjectRequest{Parent: ten.GetName(), RequestId: uuid.NewString(), Project: &adminv1.Project{
		DisplayName: "limited", Limits: &adminv1.ProjectLimits{MaxActiveSessions: proto.Int32(3)},
	}}
	created, err := f.CreateProject(f.ctx, req)
	errdefstest.Must(t, err)
	p := created.GetProject()
	if !proto.Equal(p.GetLimits(), &adminv1.ProjectLimits{MaxActiveSessions: proto.Int32(3)}) ||
		!proto.Equal(p.GetUsage(), &adminv1.ProjectUsage{}) {
		t.Fatalf("created %v", p)
	}
	again, err := f.CreateProject(f.ctx, req)
	errdefstest.Must(t, err)
	if again.GetProject().GetName() != p.GetName() {
		t.Fatalf("retry created %v", again.GetProject())
	}
	req.Project.Limits.MaxActiveSessions = proto.Int32(4)
	_, err = f.CreateProject(f.ctx, req)
	admintest.WantStatus(t, err, codes.AlreadyExists, admin.ReasonExists)

	_, err = f.CreateProject(f.ctx, &adminv1.CreateProjectRequest{Parent: ten.GetName(), RequestId: uuid.NewString(), Project: &adminv1.Project{
		DisplayName: "neg", Limits: &adminv1.ProjectLimits{MaxRetainedSessions: proto.Int32(-1)},
	}})
	admintest.WantInvalidField(t, err, "project.limits.max_retained_sessions")
	_, err = f.CreateProject(f.ctx, &adminv1.CreateProjectRequest{Parent: ten.GetName(), RequestId: uuid.NewString(), Project: &adminv1.Project{
		DisplayName: "used", Usage: &adminv1.ProjectUsage{Held: 1},
	}})
	admintest.WantInvalidField(t, err, "project.usage")

	// One path alone changes only its limit, in one revision.
	up, err := f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{
		Project:    &adminv1.Project{Name: p.GetName(), Limits: &adminv1.ProjectLimits{MaxRetainedSessions: proto.Int32(2), MaxActiveSessions: proto.Int32(99)}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"limits.max_retained_sessions"}}, Etag: p.GetEtag(),
	})
	errdefstest.Must(t, err)
	got := up.GetProject()
	if !proto.Equal(got.GetLimits(), &adminv1.ProjectLimits{MaxActiveSessions: proto.Int32(3), MaxRetainedSessions: proto.Int32(2)}) ||
		got.GetDisplayName() != "limited" || got.GetEtag() != "2" {
		t.Fatalf("updated %v", got)
	}
	// Named and unset: removed.
	up, err = f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{
		Project:    &adminv1.Project{Name: p.GetName(), DisplayName: "renamed"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"limits.max_active_sessions", "display_name"}},
	})
	errdefstest.Must(t, err)
	got = up.GetProject()
	if !proto.Equal(got.GetLimits(), &adminv1.ProjectLimits{MaxRetainedSessions: proto.Int32(2)}) || got.GetDisplayName() != "renamed" || got.GetEtag() != "3" {
		t.Fatalf("updated %v", got)
	}
	_, err = f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{
		Project:    &adminv1.Project{Name: p.GetName(), Limits: &adminv1.ProjectLimits{MaxActiveSessions: proto.Int32(-2)}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"limits.max_active_sessions"}},
	})
	admintest.WantInvalidField(t, err, "project.limits.max_active_sessions")
	for _, path := range []string{"limits", "usage", "usage.held", "name"} {
		_, err = f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{
			Project: &adminv1.Project{Name: p.GetName()}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{path}},
		})
		admintest.WantInvalidField(t, err, "update_mask")
	}
	// The default mask is still display_name: the limits stay.
	up, err = f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{Project: &adminv1.Project{Name: p.GetName(), DisplayName: "third"}})
	errdefstest.Must(t, err)
	if !proto.Equal(up.GetProject().GetLimits(), &adminv1.ProjectLimits{MaxRetainedSessions: proto.Int32(2)}) {
		t.Fatalf("a rename changed the limits: %v", up.GetProject())
	}
}

// TestGRPCProjectUsageCountsSessions: Get and List report what a project
// holds, and a limit lowered below the usage is accepted and evicts
// nothing.
func TestGRPCProjectUsageCountsSessions(t *testing.T) {
	f := newFixture(t)
	owned := storetest.Owner(t, f.st)
	node := storetest.EnabledNode(t, owned)
	storetest.Present(t, owned, node, 1)
	name := admin.ProjectName.Format(store.DefaultTenantID.String(), store.DefaultProjectID.String())
	_, err := f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{
		Project:    &adminv1.Project{Name: name, Limits: &adminv1.ProjectLimits{MaxActiveSessions: proto.Int32(2)}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"limits.max_active_sessions"}},
	})
	errdefstest.Must(t, err)
	for range 2 {
		storetest.RunningSession(t, owned)
	}
	got, err := f.GetProject(f.ctx, &adminv1.GetProjectRequest{Name: name})
	errdefstest.Must(t, err)
	if !proto.Equal(got.GetProject().GetUsage(), &adminv1.ProjectUsage{Held: 2}) {
		t.Fatalf("usage %v, want 2 held", got.GetProject().GetUsage())
	}
	list, err := f.ListProjects(f.ctx, &adminv1.ListProjectsRequest{Parent: admin.TenantName.Format(store.DefaultTenantID.String())})
	errdefstest.Must(t, err)
	if len(list.GetProjects()) != 1 || !proto.Equal(list.GetProjects()[0].GetUsage(), &adminv1.ProjectUsage{Held: 2}) {
		t.Fatalf("listed %v", list.GetProjects())
	}
	up, err := f.UpdateProject(f.ctx, &adminv1.UpdateProjectRequest{
		Project:    &adminv1.Project{Name: name, Limits: &adminv1.ProjectLimits{MaxActiveSessions: proto.Int32(0)}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"limits.max_active_sessions"}},
	})
	errdefstest.Must(t, err)
	if up.GetProject().GetLimits().GetMaxActiveSessions() != 0 || up.GetProject().GetUsage().GetHeld() != 2 {
		t.Fatalf("lowered below the usage: %v", up.GetProject())
	}
}
