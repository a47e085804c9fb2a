package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

func (a *app) allocCmd() *cobra.Command {
	return a.groupCmd("alloc", "Show compute ownership (AllocationService, read-only)", a.allocListCmd(), a.allocGetCmd())
}

func (a *app) allocListCmd() *cobra.Command {
	var (
		released bool
		project  string
		p        page
	)
	ls := a.command("list", "List allocations in creation order", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		allocs, next, err := list(p, func(size int32, token string) ([]*adminv1.Allocation, string, error) {
			resp, err := call(a.allocations.ListAllocations, &adminv1.ListAllocationsRequest{PageSize: size, PageToken: token, ShowReleased: released, Project: project})
			return resp.GetAllocations(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListAllocationsResponse{Allocations: allocs, NextPageToken: next}, func(w io.Writer) {
			row(w, "NAME", "STATE", "SESSION", "NODE", "GENERATION", "CREATE SETTLED", "CREATED")
			for _, al := range allocs {
				row(w, al.GetName(), enum(al.GetState(), "STATE_"), al.GetSession(), dash(al.GetNode()), fmt.Sprint(al.GetGeneration()),
					yesno(al.GetCreateSettled()), ts(al.GetCreateTime()))
			}
		})
		a.more(next)
		return err
	})
	ls.Flags().BoolVar(&released, "show-released", false, "include released allocations")
	ls.Flags().StringVar(&project, "project", "", "list only the allocations of this project's Sessions (tenants/TENANT/projects/PROJECT)")
	p.flags(ls.Flags())
	return ls
}

func (a *app) allocGetCmd() *cobra.Command {
	return a.command("get ALLOCATION", "Show one allocation", exactArgs("ALLOCATION"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.allocations.GetAllocation, &adminv1.GetAllocationRequest{Name: name("allocations", args[0])})
		if err != nil {
			return err
		}
		al := resp.GetAllocation()
		return a.show(resp, func(w io.Writer) {
			field(w, "NAME", al.GetName())
			field(w, "STATE", enum(al.GetState(), "STATE_"))
			field(w, "SESSION", al.GetSession())
			field(w, "PROJECT", dash(al.GetProject()))
			field(w, "NODE", dash(al.GetNode()))
			field(w, "GENERATION", fmt.Sprint(al.GetGeneration()))
			field(w, "CREATE SETTLED", yesno(al.GetCreateSettled()))
			field(w, "CREATE FAILED", yesno(al.GetCreateFailed()))
			field(w, "BOOTSTRAP COMPLETE", yesno(al.GetBootstrapComplete()))
			field(w, "CREATED", ts(al.GetCreateTime()))
			field(w, "RELEASED", ts(al.GetReleaseTime()))
			field(w, "ABANDONED", yesno(al.GetAbandoned()))
		})
	})
}
