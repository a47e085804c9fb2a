package main

import (
	"io"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

func (a *app) tenantCmd() *cobra.Command {
	return a.groupCmd("tenant", "Create, list, show, rename and delete tenants (ProjectService)",
		a.tenantCreateCmd(), a.tenantListCmd(), a.tenantGetCmd(), a.tenantUpdateCmd(), a.tenantDeleteCmd())
}

func (a *app) projectCmd() *cobra.Command {
	return a.groupCmd("project", "Create, list, show, rename, limit and delete a tenant's projects (ProjectService)",
		a.projectCreateCmd(), a.projectListCmd(), a.projectGetCmd(), a.projectUpdateCmd(), a.projectLimitsCmd(), a.projectDeleteCmd())
}

// displayNameMask is the update_mask of a rename.
func displayNameMask() *fieldmaskpb.FieldMask {
	return &fieldmaskpb.FieldMask{Paths: []string{"display_name"}}
}

// etagFlag is --etag of an update or delete.
func etagFlag(fs *pflag.FlagSet, etag *string, what string) {
	fs.StringVar(etag, "etag", "", "act only if the "+what+" still has this etag (from get); default: whatever it is")
}

// projectName is the project PROJECT of --tenant TENANT: PROJECT as it is
// when it is a whole name ("tenants/T/projects/P"), otherwise the
// project's id under --tenant, which is then required.
func projectName(cmd *cobra.Command, tenant, project string) (string, error) {
	if strings.HasPrefix(project, "tenants/") {
		return project, nil
	}
	if tenant == "" {
		return "", usagef(cmd, "%s needs --tenant, or PROJECT as tenants/TENANT/projects/PROJECT", cmd.CommandPath())
	}
	return name("tenants", tenant) + "/projects/" + project, nil
}

func (a *app) tenantCreateCmd() *cobra.Command {
	var requestID string
	c := a.command("create NAME", "Create a tenant named NAME", exactArgs("NAME"), func(cmd *cobra.Command, args []string) error {
		req := &adminv1.CreateTenantRequest{RequestId: requestID, Tenant: &adminv1.Tenant{DisplayName: args[0]}}
		if req.RequestId == "" {
			req.RequestId = uuid.NewString()
		}
		resp, err := call(a.projects.CreateTenant, req)
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { tenantFields(w, resp.GetTenant()) })
	})
	c.Flags().StringVar(&requestID, "request-id", "", "UUID that makes a retry idempotent (default: a new one)")
	return c
}

func (a *app) tenantListCmd() *cobra.Command {
	var p page
	c := a.command("list", "List tenants in creation order", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		tenants, next, err := list(p, func(size int32, token string) ([]*adminv1.Tenant, string, error) {
			resp, err := call(a.projects.ListTenants, &adminv1.ListTenantsRequest{PageSize: size, PageToken: token})
			return resp.GetTenants(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListTenantsResponse{Tenants: tenants, NextPageToken: next}, func(w io.Writer) {
			row(w, "NAME", "DISPLAY NAME", "CREATED", "ETAG")
			for _, t := range tenants {
				row(w, t.GetName(), t.GetDisplayName(), ts(t.GetCreateTime()), t.GetEtag())
			}
		})
		a.more(next)
		return err
	})
	p.flags(c.Flags())
	return c
}

func (a *app) tenantGetCmd() *cobra.Command {
	return a.command("get TENANT", "Show one tenant", exactArgs("TENANT"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.projects.GetTenant, &adminv1.GetTenantRequest{Name: name("tenants", args[0])})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { tenantFields(w, resp.GetTenant()) })
	})
}

func (a *app) tenantUpdateCmd() *cobra.Command {
	var display, etag string
	c := a.command("update TENANT", "Rename a tenant", exactArgs("TENANT"), func(cmd *cobra.Command, args []string) error {
		if display == "" {
			return usagef(cmd, "%s needs --display-name", cmd.CommandPath())
		}
		resp, err := call(a.projects.UpdateTenant, &adminv1.UpdateTenantRequest{
			Tenant: &adminv1.Tenant{Name: name("tenants", args[0]), DisplayName: display}, UpdateMask: displayNameMask(), Etag: etag,
		})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { tenantFields(w, resp.GetTenant()) })
	})
	c.Flags().StringVar(&display, "display-name", "", "the tenant's new name")
	etagFlag(c.Flags(), &etag, "tenant")
	return c
}

func (a *app) tenantDeleteCmd() *cobra.Command {
	var etag string
	c := a.command("delete TENANT", "Delete a tenant that has no projects left", exactArgs("TENANT"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.projects.DeleteTenant, &adminv1.DeleteTenantRequest{Name: name("tenants", args[0]), Etag: etag})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { tenantFields(w, resp.GetTenant()) })
	})
	etagFlag(c.Flags(), &etag, "tenant")
	return c
}

func tenantFields(w io.Writer, t *adminv1.Tenant) {
	field(w, "NAME", t.GetName())
	field(w, "DISPLAY NAME", t.GetDisplayName())
	field(w, "CREATED", ts(t.GetCreateTime()))
	field(w, "UPDATED", ts(t.GetUpdateTime()))
	field(w, "ETAG", t.GetEtag())
}

func (a *app) projectCreateCmd() *cobra.Command {
	var (
		tenant, requestID string
		l                 limitFlags
	)
	c := a.command("create NAME", "Create a project named NAME in --tenant", exactArgs("NAME"), func(cmd *cobra.Command, args []string) error {
		if tenant == "" {
			return usagef(cmd, "%s needs --tenant", cmd.CommandPath())
		}
		limits, _, err := l.limits(cmd)
		if err != nil {
			return err
		}
		req := &adminv1.CreateProjectRequest{Parent: name("tenants", tenant), RequestId: requestID, Project: &adminv1.Project{DisplayName: args[0], Limits: limits}}
		if req.RequestId == "" {
			req.RequestId = uuid.NewString()
		}
		resp, err := call(a.projects.CreateProject, req)
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { projectFields(w, resp.GetProject()) })
	})
	c.Flags().StringVar(&tenant, "tenant", "", "the tenant (its id or tenants/ID)")
	c.Flags().StringVar(&requestID, "request-id", "", "UUID that makes a retry idempotent (default: a new one)")
	l.flags(c.Flags())
	return c
}

func (a *app) projectListCmd() *cobra.Command {
	var (
		tenant string
		p      page
	)
	c := a.command("list", "List --tenant's projects in creation order", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		if tenant == "" {
			return usagef(cmd, "%s needs --tenant", cmd.CommandPath())
		}
		projects, next, err := list(p, func(size int32, token string) ([]*adminv1.Project, string, error) {
			resp, err := call(a.projects.ListProjects, &adminv1.ListProjectsRequest{Parent: name("tenants", tenant), PageSize: size, PageToken: token})
			return resp.GetProjects(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListProjectsResponse{Projects: projects, NextPageToken: next}, func(w io.Writer) {
			row(w, "NAME", "DISPLAY NAME", "CREATED", "ETAG")
			for _, p := range projects {
				row(w, p.GetName(), p.GetDisplayName(), ts(p.GetCreateTime()), p.GetEtag())
			}
		})
		a.more(next)
		return err
	})
	c.Flags().StringVar(&tenant, "tenant", "", "the tenant (its id or tenants/ID)")
	p.flags(c.Flags())
	return c
}

func (a *app) projectGetCmd() *cobra.Command {
	var tenant string
	c := a.command("get PROJECT", "Show one project", exactArgs("PROJECT"), func(cmd *cobra.Command, args []string) error {
		n, err := projectName(cmd, tenant, args[0])
		if err != nil {
			return err
		}
		resp, err := call(a.projects.GetProject, &adminv1.GetProjectRequest{Name: n})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { projectFields(w, resp.GetProject()) })
	})
	c.Flags().StringVar(&tenant, "tenant", "", "the project's tenant (its id or tenants/ID)")
	return c
}

func (a *app) projectUpdateCmd() *cobra.Command {
	var tenant, display, etag string
	c := a.command("update PROJECT", "Rename a project", exactArgs("PROJECT"), func(cmd *cobra.Command, args []string) error {
		n, err := projectName(cmd, tenant, args[0])
		if err != nil {
			return err
		}
		if display == "" {
			return usagef(cmd, "%s needs --display-name", cmd.CommandPath())
		}
		resp, err := call(a.projects.UpdateProject, &adminv1.UpdateProjectRequest{
			Project: &adminv1.Project{Name: n, DisplayName: display}, UpdateMask: displayNameMask(), Etag: etag,
		})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { projectFields(w, resp.GetProject()) })
	})
	c.Flags().StringVar(&tenant, "tenant", "", "the project's tenant (its id or tenants/ID)")
	c.Flags().StringVar(&display, "display-name", "", "the project's new name")
	etagFlag(c.Flags(), &etag, "project")
	return c
}

func (a *app) projectDeleteCmd() *cobra.Command {
	var tenant, etag string
	c := a.command("delete PROJECT", "Delete a project whose Sessions are all deleted", exactArgs("PROJECT"), func(cmd *cobra.Command, args []string) error {
		n, err := projectName(cmd, tenant, args[0])
		if err != nil {
			return err
		}
		resp, err := call(a.projects.DeleteProject, &adminv1.DeleteProjectRequest{Name: n, Etag: etag})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { projectFields(w, resp.GetProject()) })
	})
	c.Flags().StringVar(&tenant, "tenant", "", "the project's tenant (its id or tenants/ID)")
	etagFlag(c.Flags(), &etag, "project")
	return c
}

func projectFields(w io.Writer, p *adminv1.Project) {
	field(w, "NAME", p.GetName())
	field(w, "DISPLAY NAME", p.GetDisplayName())
	field(w, "CREATED", ts(p.GetCreateTime()))
	field(w, "UPDATED", ts(p.GetUpdateTime()))
	field(w, "ETAG", p.GetEtag())
	projectLimitFields(w, p)
}
