package nodeproto

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// observed is one installation with one node on the real engine, a
// Session whose Runtime accepts Turns and a Turn running on it.
type observed struct {
	cli            *client.Client
	installationID string
	get            func() *adminv1.Session
	getTurn        func() *adminv1.Turn
}

// coreArgs are extra berth-core serve arguments.
func runningTurn(t *testing.T, coreArgs ...string) observed {
	t.Helper()
	cli, err := client.New(client.WithHost(testenv.DockerHost(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	opts, _ := stack.RuntimeGateway(t, cli)
	opts.Args = append(opts.Args, coreArgs...)
	// The node serves the specification Core commits: a node configured
	// otherwise is never ready. Its containers are on the bridge, where
	// the Runtime gateway listens.
	cl := stack.OneNodeCluster(t, &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 2, MaxRetained: 2},
		opts, stack.NodeOptions{Network: "bridge"})
	cc, ctx, installationID := cl.CC, cl.Ctx, cl.Installation

	sessionsAPI := adminv1.NewSessionServiceClient(cc)
	turnsAPI := adminv1.NewTurnServiceClient(cc)
	created, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		t.Fatal(err)
	}
	name := created.GetSession().GetName()
	get := func() *adminv1.Session {
		t.Helper()
		resp, err := sessionsAPI.GetSession(ctx, &adminv1.GetSessionRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetSession()
	}
	stack.WaitFor(t, 2*time.Minute, "execution admitted", func() bool { return get().GetEnvironment().GetExecutionAdmitted() })

	// A Turn that runs until the container goes.
	sub, err := turnsAPI.SubmitTurn(ctx, &adminv1.SubmitTurnRequest{Parent: name, RequestId: uuid.NewString(), Turn: &adminv1.Turn{
		Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: "echo started; sleep 600"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	turnName := sub.GetTurn().GetName()
	getTurn := func() *adminv1.Turn {
		t.Helper()
		resp, err := turnsAPI.GetTurn(ctx, &adminv1.GetTurnRequest{Name: turnName})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTurn()
	}
	stack.WaitFor(t, time.Minute, "turn running", func() bool { return getTurn().GetState() == adminv1.Turn_STATE_RUNNING })

	return observed{cli: cli, installationID: installationID, get: get, getTurn: getTurn}
}

// TestRemovedContainerIsReportedUnavailable is issue 12's external
// removal with the real binaries and the real engine: a running Session's
// container is removed through the Engine API (as an operator or a crash
// would) while a Turn runs on it. GetSession must then report
// compute_available false with compute_reason "compute_missing" (the time
// it took is logged, not asserted: the bound is the lifecycle observation
// period), the Turn must end with a fixed code and never complete, and
// Core must not recreate the container or remove the Session's volumes
// on its own.
func TestRemovedContainerIsReportedUnavailable(t *testing.T) {
	o := runningTurn(t)
	cli, installationID, get, getTurn := o.cli, o.installationID, o.get, o.getTurn
	ctx := context.Background()
	// The Session's container, found by the engine's labels (the checker
	// reads the engine, not Berth's report).
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: stack.InstallationFilter(installationID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d containers of the installation, want 1", len(list.Items))
	}
	ctr := list.Items[0]
	volumes := func() int {
		t.Helper()
		vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: stack.InstallationFilter(installationID)})
		if err != nil {
			t.Fatal(err)
		}
		return len(vs.Items)
	}
	volsBefore := volumes()

	removed := time.Now()
	if _, err := cli.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	var s *adminv1.Session
	stack.WaitFor(t, 2*time.Minute, "compute_available false", func() bool {
		s = get()
		return !s.GetEnvironment().GetComputeAvailable()
	})
	t.Logf("external removal to compute_available false: %v (compute_reason %q)", time.Since(removed).Round(time.Millisecond), s.GetEnvironment().GetComputeReason())
	if r := s.GetEnvironment().GetComputeReason(); r != "compute_missing" {
		t.Fatalf("compute_reason %q, want compute_missing", r)
	}
	if s.GetEnvironment().GetExecutionAdmitted() {
		t.Fatal("execution admitted on missing compute")
	}

	// The Turn ends with a fixed code and never completes: whichever of
	// the Runtime's disconnection (runtime_disconnected) and the
	// observation (compute_missing) Core notices first.
	var turn *adminv1.Turn
	stack.WaitFor(t, 2*time.Minute, "turn ended", func() bool {
		turn = getTurn()
		return turn.GetState() != adminv1.Turn_STATE_RUNNING && turn.GetState() != adminv1.Turn_STATE_QUEUED
	})
	t.Logf("turn ended %v with %q after %v", turn.GetState(), turn.GetFailureCode(), time.Since(removed).Round(time.Millisecond))
	switch code := turn.GetFailureCode(); {
	case turn.GetState() != adminv1.Turn_STATE_UNCONFIRMED:
		t.Fatalf("turn %v, want UNCONFIRMED", turn.GetState())
	case code != "runtime_disconnected" && code != "compute_missing":
		t.Fatalf("turn failure code %q", code)
	}

	// Core neither recreated the container nor removed the volumes, and
	// keeps reporting the compute missing.
	time.Sleep(3 * time.Second)
	list, err = cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: stack.InstallationFilter(installationID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d containers after removal", len(list.Items))
	}
	if v := volumes(); v != volsBefore || v == 0 {
		t.Fatalf("volumes %d, were %d", v, volsBefore)
	}
	if s := get(); s.GetEnvironment().GetComputeAvailable() || s.GetState() != adminv1.Session_STATE_ACTIVE {
		t.Fatalf("session later: %v available=%v", s.GetState(), s.GetEnvironment().GetComputeAvailable())
	}
}

// TestPausedContainerEndsItsRunningTurn pauses a running Session's
// container through the Engine API: its Runtime connection stays open
// (the process is frozen, not gone), so only the observation of the
// compute can end the running Turn. GetSession must report
// compute_available false with compute_reason "compute_paused", and the
// Turn must end UNCONFIRMED with that fixed code before the gateway's
// keepalives give up on the connection (30 s here, three unanswered).
func TestPausedContainerEndsItsRunningTurn(t *testing.T) {
	o := runningTurn(t, "--runtime-keepalive", "30s")
	ctx := context.Background()
	list, err := o.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: stack.InstallationFilter(o.installationID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d containers of the installation, want 1", len(list.Items))
	}
	paused := time.Now()
	if _, err := o.cli.ContainerPause(ctx, list.Items[0].ID, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	var s *adminv1.Session
	stack.WaitFor(t, 2*time.Minute, "compute_available false", func() bool {
		s = o.get()
		return !s.GetEnvironment().GetComputeAvailable()
	})
	t.Logf("pause to compute_available false: %v (compute_reason %q)", time.Since(paused).Round(time.Millisecond), s.GetEnvironment().GetComputeReason())
	if r := s.GetEnvironment().GetComputeReason(); r != "compute_paused" {
		t.Fatalf("compute_reason %q, want compute_paused", r)
	}
	var turn *adminv1.Turn
	stack.WaitFor(t, time.Minute, "turn ended", func() bool {
		turn = o.getTurn()
		return turn.GetState() != adminv1.Turn_STATE_RUNNING
	})
	t.Logf("turn ended %v with %q after %v", turn.GetState(), turn.GetFailureCode(), time.Since(paused).Round(time.Millisecond))
	if turn.GetState() != adminv1.Turn_STATE_UNCONFIRMED || turn.GetFailureCode() != "compute_paused" {
		t.Fatalf("turn %v %q, want UNCONFIRMED compute_paused", turn.GetState(), turn.GetFailureCode())
	}
	// Core never unpauses it.
	c, err := o.cli.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Container.State; st == nil || !st.Paused {
		t.Fatal("container no longer paused")
	}
	if _, err := o.cli.ContainerUnpause(ctx, list.Items[0].ID, client.ContainerUnpauseOptions{}); err != nil {
		t.Fatal(err)
	}
}
