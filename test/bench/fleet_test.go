package bench

import (
	"fmt"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/faultnet"
	"berth.dev/test/internal/stack"
)

// fleetNodes is how many node agents the rig runs on the one engine for
// P4; the last is reached through a faultnet.Proxy for P6's cut-off.
const fleetNodes = 4

// fleetSize is how many Sessions P4 creates at once: every node full at
// the benchmark's max_active.
const fleetSize = fleetNodes * 4

// detectTimeout bounds P6's wait for Core to notice a fault; it is well
// above the goal so that a miss is measured, not cut short.
const detectTimeout = 90 * time.Second

// victim is the node P6 harms: a node agent process reached through a
// proxy Core dials.
type victim struct {
	node  *stack.Node
	name  string
	proxy *faultnet.Proxy
}

// addFleet enrolls, starts and enables fleetNodes-1 more node agents like
// the cluster's first, the last behind a proxy, and returns that one.
func (r *rig) addFleet(o stack.NodeOptions) *victim {
	r.t.Helper()
	c := r.cluster
	v := &victim{}
	for i := 1; i < fleetNodes; i++ {
		node := o
		node.Listen = stack.FreeAddr(r.t)
		advertise := ""
		if i == fleetNodes-1 {
			v.proxy = faultnet.New(r.t, stack.FreeAddr(r.t), node.Listen)
			advertise = v.proxy.Addr()
		}
		n := stack.EnrollAndStart(r.t, c.Core, c.Ctx, c.CC, c.Installation, node, advertise)
		r.nodes = append(r.nodes, n)
		if advertise != "" {
			v.node = n
		}
	}
	stack.EnableAll(r.t, c.Ctx, c.CC)
	list, err := adminv1.NewNodeServiceClient(c.CC).ListNodes(c.Ctx, &adminv1.ListNodesRequest{PageSize: 100})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, n := range list.GetNodes() {
		if n.GetAdvertiseAddress() == v.proxy.Addr() {
			v.name = n.GetName()
		}
	}
	if len(list.GetNodes()) != fleetNodes || v.name == "" {
		r.t.Fatalf("%d nodes enrolled, the proxied one %q", len(list.GetNodes()), v.name)
	}
	return v
}

// fleetAdmitted is P4's Berth side: fleetSize CreateSession calls at once,
// then one ListSessions poll until every Session reports execution
// admitted. It returns the time and the Sessions' names, and requires that
// they were spread over every node.
func (r *rig) fleetAdmitted() (time.Duration, []string) {
	r.t.Helper()
	names := make([]string, fleetSize)
	g, ctx := errgroup.WithContext(r.ctx)
	start := time.Now()
	for i := range names {
		g.Go(func() error {
			resp, err := r.sessions.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
			if err != nil {
				return fmt.Errorf("CreateSession: %w", err)
			}
			names[i] = resp.GetSession().GetName()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		r.t.Fatal(err)
	}
	for {
		done, nodes, err := r.admittedCount(names)
		if err != nil {
			r.t.Fatal(err)
		}
		if done == len(names) {
			d := time.Since(start)
			if nodes != fleetNodes {
				r.t.Fatalf("%d Sessions on %d nodes, want all %d nodes used", len(names), nodes, fleetNodes)
			}
			return d, names
		}
		if time.Since(start) > sampleTimeout {
			r.t.Fatalf("%d of %d Sessions admitted after %v", done, len(names), sampleTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// admittedCount lists the Sessions and counts those of names that report
// execution admitted and the nodes they are on; a FAILED one is an error.
func (r *rig) admittedCount(names []string) (admitted, nodes int, err error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	on := map[string]bool{}
	token := ""
	for {
		page, err := r.sessions.ListSessions(r.ctx, &adminv1.ListSessionsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return 0, 0, fmt.Errorf("ListSessions: %w", err)
		}
		for _, s := range page.GetSessions() {
			if !want[s.GetName()] {
				continue
			}
			if s.GetState() == adminv1.Session_STATE_FAILED {
				return 0, 0, fmt.Errorf("%s failed: %v", s.GetName(), s)
			}
			if s.GetEnvironment().GetExecutionAdmitted() {
				admitted++
				on[s.GetNode()] = true
			}
		}
		if token = page.GetNextPageToken(); token == "" {
			return admitted, len(on), nil
		}
	}
}

// deleteAll deletes the Sessions at once and waits until each is DELETED.
func (r *rig) deleteAll(names []string) {
	r.t.Helper()
	var g errgroup.Group
	for _, name := range names {
		g.Go(func() error {
			_, err := r.sessions.DeleteSession(r.ctx, &adminv1.DeleteSessionRequest{Name: name})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		r.t.Fatalf("DeleteSession: %v", err)
	}
	for _, name := range names {
		r.deleted(name)
	}
}

// fault is one way P6 harms the victim, and how it is repaired.
type fault struct {
	id, what     string
	harm, repair func(*victim)
}

// faults are P6's three: the node agent killed, stopped, cut off.
var faults = []fault{
	{
		id: "P6 kill", what: "agent SIGKILLed",
		harm:   func(v *victim) { v.node.Kill() },
		repair: func(v *victim) { v.node.Start() },
	},
	{
		id: "P6 stop", what: "agent SIGSTOPped",
		harm:   func(v *victim) { _ = v.node.Cmd.Process.Signal(syscall.SIGSTOP) },
		repair: func(v *victim) { _ = v.node.Cmd.Process.Signal(syscall.SIGCONT) },
	},
	{
		id: "P6 cut-off", what: "path black-holed",
		harm:   func(v *victim) { v.proxy.BlackHole() },
		repair: func(v *victim) { v.proxy.Restore() },
	},
}

// detect is one P6 sample: the time from f's harm until the admin API
// reports the victim not connected, which is when placement stops
// choosing it (ChoosePlacementNode requires a held connection). The
// victim is repaired and reconnected afterwards, untimed.
func (r *rig) detect(v *victim, f fault) time.Duration {
	r.t.Helper()
	api := adminv1.NewNodeServiceClient(r.cluster.CC)
	connected := func() (bool, error) {
		resp, err := api.GetNode(r.ctx, &adminv1.GetNodeRequest{Name: v.name})
		return stack.Connected(resp.GetNode()), err
	}
	stack.WaitFor(r.t, detectTimeout, v.name+" connected", func() bool { ok, _ := connected(); return ok })
	start := time.Now()
	f.harm(v)
	defer func() {
		f.repair(v)
		stack.WaitFor(r.t, detectTimeout, v.name+" reconnected", func() bool { ok, _ := connected(); return ok })
	}()
	for {
		ok, err := connected()
		if err != nil {
			r.t.Fatalf("GetNode: %v", err)
		}
		if !ok {
			return time.Since(start)
		}
		if time.Since(start) > detectTimeout {
			r.t.Errorf("%s: %s still connected after %v", f.id, v.name, detectTimeout)
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
