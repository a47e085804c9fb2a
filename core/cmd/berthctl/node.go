package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// name completes a bare id to a resource name of collection ("abc" ->
// "nodes/abc"); a full name passes unchanged.
func name(collection, arg string) string {
	if strings.HasPrefix(arg, collection+"/") {
		return arg
	}
	return collection + "/" + arg
}

func (a *app) nodeCmd() *cobra.Command {
	return a.groupCmd("node", "Enroll compute hosts and manage their lifecycle (NodeService)",
		a.tokenCmd(), a.nodeListCmd(), a.nodeGetCmd(),
		a.nodeChangeCmd("enable", "Admit an enrolled or retired node to placement", enableNode),
		a.nodeChangeCmd("retire", "Stop new placement on a node; what it holds stays owned", retireNode),
		a.nodeRemoveCmd())
}

func (a *app) tokenCmd() *cobra.Command {
	return a.groupCmd("token", "Create, list and revoke enrollment tokens", a.tokenCreateCmd(), a.tokenListCmd(), a.tokenRevokeCmd())
}

func (a *app) tokenCreateCmd() *cobra.Command {
	var (
		ttl       time.Duration
		requestID string
		out       string
	)
	create := a.command("create", "Create a single-use enrollment token", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		req := &adminv1.CreateEnrollmentTokenRequest{RequestId: requestID}
		if req.RequestId == "" {
			req.RequestId = uuid.NewString()
		}
		if ttl != 0 {
			req.Ttl = durationpb.New(ttl)
		}
		resp, err := call(a.nodes.CreateEnrollmentToken, req)
		if err != nil {
			return err
		}
		text := resp.GetTokenText()
		if out != "" {
			if err := writeSecret(out, text); err != nil {
				return err
			}
			// Written where it was asked for: not printed as well.
			resp.TokenText = ""
		}
		return a.show(resp, func(w io.Writer) {
			tokenFields(w, resp.GetEnrollmentToken())
			if out != "" {
				field(w, "TOKEN", "written to "+out+" (mode 0600)")
			} else {
				field(w, "TOKEN", text)
			}
		})
	})
	create.Long = `create makes a single-use, expiring enrollment token. Its text is shown
only once (Core keeps only its digest): with --out it is written to a new
file (mode 0600) for 'berth-nodeagent enroll --token-file' instead of being
printed. A retry with the same --request-id gives the same unused token a new
secret.`
	create.Flags().DurationVar(&ttl, "ttl", 0, "how long the token stays usable (default: Core's, one hour)")
	create.Flags().StringVar(&requestID, "request-id", "", "UUID that makes a retry idempotent (default: a new one)")
	create.Flags().StringVar(&out, "out", "", "write the token text to this new file (mode 0600) instead of printing it")
	return create
}

func (a *app) tokenListCmd() *cobra.Command {
	var (
		inactive bool
		p        page
	)
	ls := a.command("list", "List enrollment tokens", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		tokens, next, err := list(p, func(size int32, token string) ([]*adminv1.EnrollmentToken, string, error) {
			resp, err := call(a.nodes.ListEnrollmentTokens, &adminv1.ListEnrollmentTokensRequest{PageSize: size, PageToken: token, ShowInactive: inactive})
			return resp.GetEnrollmentTokens(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListEnrollmentTokensResponse{EnrollmentTokens: tokens, NextPageToken: next}, func(w io.Writer) {
			row(w, "NAME", "STATE", "CREATED", "EXPIRES", "NODE")
			for _, t := range tokens {
				row(w, t.GetName(), enum(t.GetState(), "STATE_"), ts(t.GetCreateTime()), ts(t.GetExpireTime()), dash(t.GetNode()))
			}
		})
		a.more(next)
		return err
	})
	ls.Flags().BoolVar(&inactive, "show-inactive", false, "include used, expired and revoked tokens")
	p.flags(ls.Flags())
	return ls
}

func (a *app) tokenRevokeCmd() *cobra.Command {
	return a.command("revoke TOKEN", "Make an unused enrollment token unusable", exactArgs("TOKEN"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.nodes.RevokeEnrollmentToken, &adminv1.RevokeEnrollmentTokenRequest{Name: name("enrollmentTokens", args[0])})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { tokenFields(w, resp.GetEnrollmentToken()) })
	})
}

// writeSecret writes text to a new file at path, mode 0600; an existing
// file is never overwritten.
func writeSecret(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	if _, err := f.WriteString(text + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("token file: %w", err)
	}
	return f.Close()
}

func tokenFields(w io.Writer, t *adminv1.EnrollmentToken) {
	field(w, "NAME", t.GetName())
	field(w, "STATE", enum(t.GetState(), "STATE_"))
	field(w, "CREATED", ts(t.GetCreateTime()))
	field(w, "EXPIRES", ts(t.GetExpireTime()))
	if t.GetUseTime() != nil {
		field(w, "USED", ts(t.GetUseTime()))
		field(w, "NODE", t.GetNode())
	}
	if t.GetRevokeTime() != nil {
		field(w, "REVOKED", ts(t.GetRevokeTime()))
	}
}

func (a *app) nodeListCmd() *cobra.Command {
	var (
		removed bool
		p       page
	)
	c := a.command("list", "List nodes in enrollment order", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		nodes, next, err := list(p, func(size int32, token string) ([]*adminv1.Node, string, error) {
			resp, err := call(a.nodes.ListNodes, &adminv1.ListNodesRequest{PageSize: size, PageToken: token, ShowRemoved: removed})
			return resp.GetNodes(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListNodesResponse{Nodes: nodes, NextPageToken: next}, func(w io.Writer) {
			row(w, "NAME", "STATE", "CONNECTED", "READY", "GENERATION", "ACTIVE", "ADDRESS")
			for _, n := range nodes {
				row(w, n.GetName(), enum(n.GetState(), "STATE_"), yesno(n.GetPresence().GetConnected()), readiness(n.GetReadiness()),
					fmt.Sprint(n.GetReadiness().GetGeneration()), fmt.Sprintf("%d/%d", n.GetCapacity().GetActive(), n.GetCapacity().GetMaxActive()),
					n.GetAdvertiseAddress())
			}
		})
		a.more(next)
		return err
	})
	c.Flags().BoolVar(&removed, "show-removed", false, "include removed nodes")
	p.flags(c.Flags())
	return c
}

// readiness is "yes", or "no" with the diagnostic code.
func readiness(r *adminv1.Readiness) string {
	if r.GetReady() {
		return "yes"
	}
	if r.GetDiagnosticCode() != "" {
		return "no (" + r.GetDiagnosticCode() + ")"
	}
	return "no"
}

func (a *app) nodeGetCmd() *cobra.Command {
	return a.command("get NODE", "Show one node: presence, readiness and capacity", exactArgs("NODE"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.nodes.GetNode, &adminv1.GetNodeRequest{Name: name("nodes", args[0])})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { nodeFields(w, resp.GetNode()) })
	})
}

func nodeFields(w io.Writer, n *adminv1.Node) {
	c := n.GetCapacity()
	field(w, "NAME", n.GetName())
	field(w, "STATE", enum(n.GetState(), "STATE_"))
	field(w, "ADDRESS", n.GetAdvertiseAddress())
	field(w, "ENROLLED", ts(n.GetEnrollTime()))
	field(w, "ENROLLMENT TOKEN", dash(n.GetEnrollmentToken()))
	field(w, "BACKEND", dash(n.GetBackendFingerprint()))
	field(w, "CONNECTED", yesno(n.GetPresence().GetConnected()))
	field(w, "LAST REPORT", ts(n.GetPresence().GetLastReportTime()))
	field(w, "READY", readiness(n.GetReadiness()))
	field(w, "GENERATION", fmt.Sprint(n.GetReadiness().GetGeneration()))
	field(w, "CPU MILLIS", fmt.Sprint(c.GetCpuMillis()))
	field(w, "MEMORY BYTES", size(c.GetMemoryBytes()))
	field(w, "DISK FREE BYTES", size(c.GetDiskFreeBytes()))
	field(w, "ACTIVE", fmt.Sprintf("%d of %d", c.GetActive(), c.GetMaxActive()))
	field(w, "RETAINED", fmt.Sprintf("%d of %d", c.GetRetained(), c.GetMaxRetained()))
	field(w, "NO ROOM REASON", dash(c.GetNoRoomReason()))
}

// nodeChange is one node state change: the call and its answer.
type nodeChange func(a *app, name string) (proto.Message, *adminv1.Node, error)

// nodeChangeCmd is enable, retire or remove: one call naming the node,
// answered with the node.
func (a *app) nodeChangeCmd(verb, short string, change nodeChange) *cobra.Command {
	return a.command(verb+" NODE", short, exactArgs("NODE"), func(cmd *cobra.Command, args []string) error {
		resp, node, err := change(a, name("nodes", args[0]))
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { nodeFields(w, node) })
	})
}

func enableNode(a *app, name string) (proto.Message, *adminv1.Node, error) {
	r, err := call(a.nodes.EnableNode, &adminv1.EnableNodeRequest{Name: name})
	return r, r.GetNode(), err
}

func retireNode(a *app, name string) (proto.Message, *adminv1.Node, error) {
	r, err := call(a.nodes.RetireNode, &adminv1.RetireNodeRequest{Name: name})
	return r, r.GetNode(), err
}

// nodeRemoveCmd is remove: RemoveNode, or with --abandon-backend the
// explicit abandon of what a retired node that came back on another
// backend still holds (RemoveNodeRequest abandon), whose record it shows.
func (a *app) nodeRemoveCmd() *cobra.Command {
	var abandon string
	c := a.command("remove NODE", "Remove a retired or enrolled node for good", exactArgs("NODE"), func(cmd *cobra.Command, args []string) error {
		req := &adminv1.RemoveNodeRequest{Name: name("nodes", args[0])}
		if abandon != "" {
			req.Abandon = &adminv1.NodeAbandon{BackendFingerprint: abandon}
		}
		resp, err := call(a.nodes.RemoveNode, req)
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) {
			nodeFields(w, resp.GetNode())
			if ab := resp.GetAbandonment(); ab != nil {
				var allocations []string
				for _, al := range ab.GetAllocations() {
					allocations = append(allocations, al.GetAllocation())
				}
				field(w, "ABANDONED BACKEND", ab.GetBackendFingerprint())
				field(w, "ABANDONED AT", ts(ab.GetAbandonTime()))
				field(w, "ABANDONED ALLOCATIONS", dash(strings.Join(allocations, ", ")))
				field(w, "ABANDONED RESERVATIONS", dash(strings.Join(ab.GetReservations(), ", ")))
			}
		})
	})
	c.Flags().StringVar(&abandon, "abandon-backend", "", "abandon what the retired node still holds on this backend, its bound one (see node get BACKEND): only for a node whose agent came back on another backend; its Sessions fail and nothing is cleaned up")
	return c
}
