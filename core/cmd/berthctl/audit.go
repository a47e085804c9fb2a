package main

import (
	"io"
	"regexp"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

func (a *app) auditCmd() *cobra.Command {
	return a.groupCmd("audit", "Read the audit trail (AuditService)", a.auditListCmd())
}

// keyNameRE is a project key's name, whose last segment is its id.
var keyNameRE = regexp.MustCompile(`^tenants/[^/]+/projects/[^/]+/keys/([^/]+)$`)

// auditActor is the API's actor filter of --actor: "admin", "core",
// "key:<id>", or a key's name (tenants/T/projects/P/keys/K) for its id.
func auditActor(actor string) string {
	if m := keyNameRE.FindStringSubmatch(actor); m != nil {
		return "key:" + m[1]
	}
	return actor
}

func (a *app) auditListCmd() *cobra.Command {
	var (
		since, until                                 time.Duration
		tenant, project, actor, action, res, outcome string
		p                                            page
	)
	c := a.command("list", "List audit events, oldest first, up to five seconds ago (--until for later)", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		if since < 0 || until < 0 {
			return usagef(cmd, "--since and --until must not be negative")
		}
		req := &adminv1.ListAuditEventsRequest{Actor: auditActor(actor), ActionPrefix: action, Resource: res, Outcome: outcome}
		now := time.Now()
		if since > 0 {
			req.StartTime = timestamppb.New(now.Add(-since))
		}
		if cmd.Flags().Changed("until") {
			req.EndTime = timestamppb.New(now.Add(-until))
		}
		if project != "" {
			name, err := projectName(cmd, tenant, project)
			if err != nil {
				return err
			}
			req.Project = name
		}
		events, next, err := list(p, func(size int32, token string) ([]*adminv1.AuditEvent, string, error) {
			req.PageSize, req.PageToken = size, token
			resp, err := call(a.audit.ListAuditEvents, req)
			return resp.GetAuditEvents(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListAuditEventsResponse{AuditEvents: events, NextPageToken: next}, func(w io.Writer) {
			row(w, "TIME", "ACTOR", "ACTION", "RESOURCE", "OUTCOME", "REQUEST")
			for _, e := range events {
				row(w, ts(e.GetOccurTime()), e.GetActor(), e.GetAction(), dash(e.GetResource()), e.GetOutcome(), e.GetRequestId())
			}
		})
		a.more(next)
		return err
	})
	f := c.Flags()
	f.DurationVar(&since, "since", 0, "list events of the last DURATION (default: from the oldest kept)")
	f.DurationVar(&until, "until", 0, "list events up to DURATION ago (default: 5s ago, so a late commit is not skipped; 0 lists up to now)")
	f.StringVar(&project, "project", "", "only events in PROJECT (tenants/T/projects/P, or an id with --tenant)")
	f.StringVar(&tenant, "tenant", "", "the project's tenant (when --project is an id)")
	f.StringVar(&actor, "actor", "", `only events by "admin", "core", "key:<id>" or a key's name`)
	f.StringVar(&action, "action", "", `only events whose action starts with this ("session.", "call.node_service.")`)
	f.StringVar(&res, "resource", "", "only events about this resource name")
	f.StringVar(&outcome, "outcome", "", `only events with this outcome ("ok" or a reason)`)
	p.flags(f)
	return c
}
