package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// limitFlags are --max-active and --max-retained: a non-negative number of
// Sessions, or "none" for no limit.
type limitFlags struct{ active, retained string }

func (l *limitFlags) flags(fs *pflag.FlagSet) {
	fs.StringVar(&l.active, "max-active", "", `the most Sessions the project may hold actively (deleting ones count until cleanup), or "none"`)
	fs.StringVar(&l.retained, "max-retained", "", `the most suspended Sessions the project may retain, or "none"`)
}

// parseLimit reads a limit flag: "none" is no limit (nil).
func parseLimit(cmd *cobra.Command, flag, value string) (*int32, error) {
	if value == "none" {
		return nil, nil
	}
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil || n < 0 {
		return nil, usagef(cmd, "--%s must be a number of Sessions (0 or more) or none", flag)
	}
	v := int32(n)
	return &v, nil
}

// limits reads the flags given on cmd into the project's limits and the
// update_mask paths they change; no flag given is nil limits and no path.
func (l *limitFlags) limits(cmd *cobra.Command) (*adminv1.ProjectLimits, []string, error) {
	var (
		out   adminv1.ProjectLimits
		paths []string
	)
	for _, f := range []struct {
		flag, value, path string
		to                **int32
	}{
		{"max-active", l.active, "limits.max_active_sessions", &out.MaxActiveSessions},
		{"max-retained", l.retained, "limits.max_retained_sessions", &out.MaxRetainedSessions},
	} {
		if !cmd.Flags().Changed(f.flag) {
			continue
		}
		v, err := parseLimit(cmd, f.flag, f.value)
		if err != nil {
			return nil, nil, err
		}
		*f.to = v
		paths = append(paths, f.path)
	}
	if len(paths) == 0 {
		return nil, nil, nil
	}
	return &out, paths, nil
}

func (a *app) projectLimitsCmd() *cobra.Command {
	var (
		tenant, etag string
		l            limitFlags
	)
	c := a.command("limits PROJECT", "Set or remove a project's limits (--max-active, --max-retained); lowering one evicts nothing",
		exactArgs("PROJECT"), func(cmd *cobra.Command, args []string) error {
			n, err := projectName(cmd, tenant, args[0])
			if err != nil {
				return err
			}
			limits, paths, err := l.limits(cmd)
			if err != nil {
				return err
			}
			if len(paths) == 0 {
				return usagef(cmd, "%s needs --max-active or --max-retained", cmd.CommandPath())
			}
			resp, err := call(a.projects.UpdateProject, &adminv1.UpdateProjectRequest{
				Project: &adminv1.Project{Name: n, Limits: limits}, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}, Etag: etag,
			})
			if err != nil {
				return err
			}
			return a.show(resp, func(w io.Writer) { projectFields(w, resp.GetProject()) })
		})
	c.Flags().StringVar(&tenant, "tenant", "", "the project's tenant (its id or tenants/ID)")
	l.flags(c.Flags())
	etagFlag(c.Flags(), &etag, "project")
	return c
}

// limitText is a limit for people: its number, or "none".
func limitText(v *int32) string {
	if v == nil {
		return "none"
	}
	return strconv.Itoa(int(*v))
}

// projectLimitFields shows a project's limits and usage.
func projectLimitFields(w io.Writer, p *adminv1.Project) {
	var active, retained *int32
	if l := p.GetLimits(); l != nil {
		active, retained = l.MaxActiveSessions, l.MaxRetainedSessions
	}
	field(w, "MAX ACTIVE", limitText(active))
	field(w, "MAX RETAINED", limitText(retained))
	field(w, "HELD", fmt.Sprint(p.GetUsage().GetHeld()))
	field(w, "RETAINED", fmt.Sprint(p.GetUsage().GetRetained()))
}
