package main

import (
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

func (a *app) keyCmd() *cobra.Command {
	return a.groupCmd("key", "Create, list and revoke a project's API keys (ProjectService)",
		a.keyCreateCmd(), a.keyListCmd(), a.keyRevokeCmd())
}

func (a *app) keyCreateCmd() *cobra.Command {
	var (
		tenant, display, requestID string
		expires                    time.Duration
	)
	c := a.command("create PROJECT", "Create an API key of PROJECT and print its token once", exactArgs("PROJECT"), func(cmd *cobra.Command, args []string) error {
		parent, err := projectName(cmd, tenant, args[0])
		if err != nil {
			return err
		}
		if expires < 0 {
			return usagef(cmd, "--expires must not be negative")
		}
		req := &adminv1.CreateProjectKeyRequest{Parent: parent, RequestId: requestID, Key: &adminv1.ProjectKey{DisplayName: display}}
		if req.RequestId == "" {
			req.RequestId = uuid.NewString()
		}
		if expires > 0 {
			req.Key.ExpireTime = timestamppb.New(time.Now().Add(expires))
		}
		resp, err := call(a.projects.CreateProjectKey, req)
		if err != nil {
			return err
		}
		if resp.GetToken() == "" {
			fmt.Fprintln(a.stderr, "warning: this request id made its key before; its token is shown only once. Revoke the key and create another if the token was lost.")
		} else {
			fmt.Fprintln(a.stderr, "The token is shown only now: store it as a secret (a file of mode 0600) and give it to the application as its bearer token.")
		}
		return a.show(resp, func(w io.Writer) {
			keyFields(w, resp.GetKey())
			if resp.GetToken() != "" {
				field(w, "TOKEN", resp.GetToken())
			}
		})
	})
	c.Flags().StringVar(&tenant, "tenant", "", "the project's tenant (when PROJECT is an id)")
	c.Flags().StringVar(&display, "display-name", "", "an optional label (at most 63 characters)")
	c.Flags().DurationVar(&expires, "expires", 0, "the key stops authenticating after this long (default: never)")
	c.Flags().StringVar(&requestID, "request-id", "", "UUID that makes a retry idempotent (default: a new one)")
	return c
}

func (a *app) keyListCmd() *cobra.Command {
	var (
		tenant string
		p      page
	)
	c := a.command("list PROJECT", "List PROJECT's keys in creation order (never their tokens)", exactArgs("PROJECT"), func(cmd *cobra.Command, args []string) error {
		parent, err := projectName(cmd, tenant, args[0])
		if err != nil {
			return err
		}
		keys, next, err := list(p, func(size int32, token string) ([]*adminv1.ProjectKey, string, error) {
			resp, err := call(a.projects.ListProjectKeys, &adminv1.ListProjectKeysRequest{Parent: parent, PageSize: size, PageToken: token})
			return resp.GetKeys(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListProjectKeysResponse{Keys: keys, NextPageToken: next}, func(w io.Writer) {
			row(w, "NAME", "STATE", "CREATED", "EXPIRES", "DISPLAY NAME")
			for _, k := range keys {
				row(w, k.GetName(), enum(k.GetState(), "STATE_"), ts(k.GetCreateTime()), ts(k.GetExpireTime()), dash(k.GetDisplayName()))
			}
		})
		a.more(next)
		return err
	})
	c.Flags().StringVar(&tenant, "tenant", "", "the project's tenant (when PROJECT is an id)")
	p.flags(c.Flags())
	return c
}

func (a *app) keyRevokeCmd() *cobra.Command {
	return a.command("revoke KEY", "Revoke a key for good (KEY is tenants/T/projects/P/keys/K)", exactArgs("KEY"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.projects.RevokeProjectKey, &adminv1.RevokeProjectKeyRequest{Name: args[0]})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { keyFields(w, resp.GetKey()) })
	})
}

func keyFields(w io.Writer, k *adminv1.ProjectKey) {
	field(w, "NAME", k.GetName())
	field(w, "DISPLAY NAME", dash(k.GetDisplayName()))
	field(w, "STATE", enum(k.GetState(), "STATE_"))
	field(w, "CREATED", ts(k.GetCreateTime()))
	field(w, "EXPIRES", ts(k.GetExpireTime()))
	if k.GetRevokeTime() != nil {
		field(w, "REVOKED", ts(k.GetRevokeTime()))
	}
}
