package chaos

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/sandbox/docker"
	"berth.dev/test/internal/stack"
)

// The harness's self-tests: each breaks one thing an observer exists to
// see, through the Engine API or the processes, in a real cluster, and
// requires the observer to report it (cluster.captured collects the
// violations instead of failing the test). A control reading of the same
// observer on the unbroken cluster must report nothing, so a check that
// always fires passes no more than one that never does.
// TestInvariantChecksDetectViolations (security_test.go) does the same for
// I1-I3.

// TestWitnessDetectsTurnRunTwice runs a Turn to completion, then runs the
// Turn's own command a second time inside its sandbox through the Engine
// API (an exec in the container, as a replayed Turn would run it): the
// second execution reports itself to the host-side witness and appends
// its workspace line like the first, and checkWitness must report the

// selfTestCluster is the fixture a self-test breaks: a cluster of o's
// shape (one node) with one Session ACTIVE on it, whose name it returns.
func selfTestCluster(t *testing.T, o options) (*cluster, []string) {
	t.Helper()
	c := newCluster(t, &run{}, o)
	names := c.mustCreate(1)
	if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != 1 {
		t.Fatal("the Session never became ACTIVE")
	}
	return c, names
}

// Turn as run twice, by both witnesses.
func TestWitnessDetectsTurnRunTwice(t *testing.T) {
	c, names := selfTestCluster(t, options{proxied: -1, nodes: 1, turns: true})
	turn, err := c.submitTurn(names[0])
	if err != nil {
		t.Fatalf("SubmitTurn: %v", err)
	}
	var tally turnTally
	c.checkTurns([]submitted{turn}, &tally, true)
	if tally.completed != 1 {
		t.Fatalf("the Turn did not complete (%+v): the fixture needs one execution to repeat", tally)
	}
	var got []string
	c.captured = &got
	c.checkWitness([]submitted{turn})
	if len(got) > 0 {
		t.Errorf("the witness reports a Turn that ran once:\n%s", strings.Join(got, "\n"))
	}
	got = nil
	if code := c.execInSession(names[0], c.witness.script(turn.nonce, 0)); code != 0 {
		t.Fatalf("the second execution of the Turn's command exited %d", code)
	}
	c.checkWitness([]submitted{turn})
	c.captured = nil
	want := "I4: turn " + turn.name + " ran more than once: 2 host-side reports, 2 workspace lines"
	if joined := strings.Join(got, "\n"); !strings.Contains(joined, want) {
		t.Errorf("the witness missed the second execution (want %q); it reported:\n%s", want, joined)
	}
	c.invariants()
}

// TestOutcomesDetectSessionsNotActive breaks I6 twice in a cluster
// without the Runtime gateway, so that only the engine can tell: a
// Session ACTIVE in Berth whose container is stopped through the Engine
// API (requireOutcomes must read the engine, not Berth's report), and a
// Session created while its only node agent is stopped (SIGSTOP: the node
// is still present, so the Session is placed, but its Create never
// reaches the engine), which stays provisioning past a short deadline.
func TestOutcomesDetectSessionsNotActive(t *testing.T) {
	c, stopped := selfTestCluster(t, options{proxied: -1, nodes: 1})
	var got []string
	c.captured = &got
	requireOutcomes(t, c, stopped, activeDeadline)
	if len(got) > 0 {
		t.Errorf("I6 reports a Session that is ACTIVE and running:\n%s", strings.Join(got, "\n"))
	}
	got = nil
	a := bySession(c.allocations())[stopped[0]]
	ctx := context.Background()
	list, err := c.cli.ContainerList(ctx, client.ContainerListOptions{
		Filters: stack.InstallationFilter(c.inst).Add("label", docker.LabelAllocation+"="+strings.TrimPrefix(a.GetName(), "allocations/")),
	})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the Session's running container: %d, %v", len(list.Items), err)
	}
	timeout := 1
	if _, err := c.cli.ContainerStop(ctx, list.Items[0].ID, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatalf("stop the Session's container: %v", err)
	}
	// Berth still reports the allocation ACTIVE: the engine is what
	// requireOutcomes must find wanting.
	if !active(bySession(c.allocations())[stopped[0]]) {
		t.Fatal("the allocation left ACTIVE when its container stopped: the fixture needs Berth's report unchanged")
	}
	requireOutcomes(t, c, stopped, 5*time.Second)

	thaw := c.freeze()
	provisioning := c.mustCreate(1)
	requireOutcomes(t, c, provisioning, 5*time.Second)
	thaw()
	c.captured = nil
	joined := strings.Join(got, "\n")
	for _, want := range []string{
		"I6: not ACTIVE nor FAILED with a code 5s after the repair: " + stopped[0] + ": ACTIVE(settled) (no running container on the engine)",
		"I6: not ACTIVE nor FAILED with a code 5s after the repair: " + provisioning[0] + ": ",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("I6 missed %q; it reported:\n%s", want, joined)
		}
	}
	c.invariants()
}

// TestRefusalCheckDetectsUnexplainedRefusals gets a real capacity refusal
// from Core (its only node full) and judges it the soak's way
// (cluster.refusal): by the state of its moment it is explained; judged
// by a state with room (the Session deleted, the node empty) it is a
// violation, as it would be if Core refused with room left; so it is when
// ListNodes fails right after it (Core stopped), however full the node
// was before; and an UNAVAILABLE from the stopped Core is never explained.
func TestRefusalCheckDetectsUnexplainedRefusals(t *testing.T) {
	c, _ := selfTestCluster(t, options{proxied: -1, nodes: 1, maxActive: 1})
	full := c.capacity()
	_, refused := c.createSession()
	if status.Code(refused) != codes.FailedPrecondition || stack.AdminReason(refused) != "no_ready_node_with_capacity" {
		t.Fatalf("CreateSession on a full node: %v; want FAILED_PRECONDITION no_ready_node_with_capacity", refused)
	}
	var got []string
	c.captured = &got
	if why := c.refusal("CreateSession", refused, full); len(got) > 0 || why != "no capacity: every node full" {
		t.Errorf("a refusal its moment explains was judged %q:\n%s", why, strings.Join(got, "\n"))
	}
	got = nil

	c.deleteAll()
	c.settle()
	c.refusal("CreateSession", refused, c.capacity())

	c.core.Stop()
	_, down := c.createSession()
	if status.Code(down) != codes.Unavailable {
		t.Fatalf("CreateSession with Core stopped: %v; want UNAVAILABLE", down)
	}
	c.refusal("CreateSession", refused, full)
	c.startCore()
	c.refusal("CreateSession", down, c.capacity())
	c.captured = nil
	joined := strings.Join(got, "\n")
	for _, want := range []string{
		"refusal: CreateSession refused without an explanation (no capacity with every node ready and room left)",
		"refusal: CreateSession refused without an explanation (no capacity, and ListNodes failed right after)",
		"refusal: CreateSession refused without an explanation (Unavailable)",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the refusal check missed %q; it reported:\n%s", want, joined)
		}
	}
	c.invariants()
}

// TestEngineLeakCheckDetectsLeftovers lets a Session's cleanup finish,
// then plants through the Engine API what a cleanup that missed something
// would leave: a container and a volume labelled with the installation
// under fresh names, a container and a volume under the allocation's
// derived names without any label, and a tombstone holding a name no
// allocation has. checkEngineLeaks must report each one.
func TestEngineLeakCheckDetectsLeftovers(t *testing.T) {
	c, _ := selfTestCluster(t, options{proxied: -1, nodes: 1})
	all := c.allAllocations(c.db())
	if len(all) != 1 {
		t.Fatalf("%d allocations, want 1", len(all))
	}
	derived := docker.ResourceName(c.inst, all[0].Reference())
	c.deleteAll()
	c.settle()
	var got []string
	c.captured = &got
	c.checkEngineLeaks()
	if len(got) > 0 {
		t.Errorf("the leak check reports a clean engine:\n%s", strings.Join(got, "\n"))
	}
	got = nil

	ctx := context.Background()
	labels := map[string]string{docker.LabelInstallation: c.inst}
	fresh := "chaos-leak-" + uuid.NewString()[:8]
	tombstone := "chaos-tombstone-" + uuid.NewString()[:8]
	// A tombstone on a later incarnation's names (an overdue restore's
	// claimed target) is a receipt Berth keeps, like one on a first name:
	// not reported.
	tombstoneLabels := map[string]string{docker.LabelInstallation: c.inst, docker.LabelTombstone: "1"}
	restoreTarget := derived + "-g2"
	containers := map[string]map[string]string{
		fresh:         labels,
		derived:       nil,
		tombstone:     tombstoneLabels,
		restoreTarget: tombstoneLabels,
	}
	volumes := map[string]map[string]string{
		fresh + "-volume":              labels,
		derived + "-environment":       nil,
		restoreTarget + "-home":        tombstoneLabels,
		restoreTarget + "-environment": tombstoneLabels,
	}
	t.Cleanup(func() {
		for name := range containers {
			_, _ = c.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true})
		}
		for name := range volumes {
			_, _ = c.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
		}
	})
	for name, l := range containers {
		if _, err := c.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: containerConfig(c.image, l)}); err != nil {
			t.Fatalf("plant container %s: %v", name, err)
		}
	}
	for name, l := range volumes {
		if _, err := c.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: l}); err != nil {
			t.Fatalf("plant volume %s: %v", name, err)
		}
	}
	// The check reads what the engine's event stream recorded: wait until
	// the planted creations are in it.
	stack.WaitFor(t, 30*time.Second, "the planted creations in the engine's event stream", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for name := range containers {
			if _, ok := c.containersSeen[name]; !ok {
				return false
			}
		}
		for name := range volumes {
			if c.creates["volume:"+name] == 0 {
				return false
			}
		}
		return true
	})
	c.checkEngineLeaks()
	c.captured = nil
	joined := strings.Join(got, "\n")
	if strings.Contains(joined, restoreTarget) {
		t.Errorf("the leak check reported a restore target's tombstone:\n%s", joined)
	}
	for _, want := range []string{
		"I2: container " + fresh + " created during the run is still on the engine",
		"I2: container " + derived + " created during the run is still on the engine",
		"I2: volume " + fresh + "-volume created during the run is still on the engine",
		"I2: volume " + derived + "-environment created during the run is still on the engine",
		"I2: tombstone container " + tombstone + " holds the names of none of the installation's allocations",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the leak check missed %q; it reported:\n%s", want, joined)
		}
	}
}

// execInSession runs argv in the running container of session's
// allocation through the Engine API, as the container's user, and
// returns its exit code.
func (c *cluster) execInSession(session string, argv []string) int {
	c.t.Helper()
	ctx := context.Background()
	a := bySession(c.allocations())[session]
	list, err := c.cli.ContainerList(ctx, client.ContainerListOptions{
		Filters: stack.InstallationFilter(c.inst).Add("label", docker.LabelAllocation+"="+strings.TrimPrefix(a.GetName(), "allocations/")),
	})
	if err != nil {
		c.t.Fatalf("list the Session's containers: %v", err)
	}
	var id string
	for _, ct := range list.Items {
		if ct.State == container.StateRunning && ct.Labels[docker.LabelTombstone] == "" {
			id = ct.ID
		}
	}
	if id == "" {
		c.t.Fatalf("Session %s has no running container", session)
	}
	created, err := c.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		c.t.Fatalf("exec create: %v", err)
	}
	att, err := c.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		c.t.Fatalf("exec attach: %v", err)
	}
	_, _ = io.Copy(io.Discard, att.Reader)
	att.Close()
	res, err := c.cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		c.t.Fatalf("exec inspect: %v", err)
	}
	return res.ExitCode
}

// TestIncarnationNames: the names a restore targets (and a tombstone may
// claim) are an allocation's <base>-g<generation> and their volumes; a
// snapshot's, another allocation's or a malformed suffix are not.
func TestIncarnationNames(t *testing.T) {
	bases := map[string]string{"berth-abc": "a"}
	for name, want := range map[string]bool{
		"berth-abc-g2": true, "berth-abc-g12-home": true, "berth-abc-g3-environment": true,
		"berth-abc": false, "berth-abc-home": false, "berth-abc-s0f3": false, "berth-abc-g": false,
		"berth-abc-gx": false, "berth-abd-g2": false, "berth-abc-g2x-home": false,
	} {
		if got := incarnationOf(bases, name); got != want {
			t.Errorf("incarnationOf(%q) = %v, want %v", name, got, want)
		}
	}
}
