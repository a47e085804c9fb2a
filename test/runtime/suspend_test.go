package runtime

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"

	"berth.dev/test/internal/stack"
)

// suspendIdle is the deployment's suspension idle time in these tests:
// the least the deployment accepts.
const suspendIdle = time.Minute

// suspendingSpec is the test deployment with a suspension policy.
func suspendingSpec() *adminv1.Specification {
	return &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4,
		Suspension: &adminv1.SuspensionPolicy{Idle: durationpb.New(suspendIdle), Retention: durationpb.New(time.Hour)}}
}

// workspaceScript writes 10 MB of random bytes into the workspace and
// prints their digest.
const workspaceScript = "head -c 10485760 /dev/urandom > /workspace/data && sha256sum /workspace/data"

// session reads a Session.
func (e *env) session(name string) *adminv1.Session {
	e.t.Helper()
	g, err := e.sessions.GetSession(e.ctx, &adminv1.GetSessionRequest{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	return g.GetSession()
}

// waitPhase waits until the Session's compute phase is want.
func (e *env) waitPhase(name string, want adminv1.ComputePhase, within time.Duration) *adminv1.Session {
	e.t.Helper()
	var s *adminv1.Session
	stack.WaitFor(e.t, within, name+" "+want.String(), func() bool {
		s = e.session(name)
		return s.GetEnvironment().GetComputePhase() == want
	})
	return s
}

// allocationContainers lists the engine's containers of a Session's
// allocation, by role: the running compute, the snapshot holders, and
// anything else.
func (e *env) allocationContainers(allocation string) (running, snapshots, other []string) {
	e.t.Helper()
	id := strings.TrimPrefix(allocation, "allocations/")
	cs, err := e.docker.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: stack.InstallationFilter(e.installationID).Add("label", docker.LabelAllocation+"="+id)})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range cs.Items {
		switch {
		case c.Labels[docker.LabelSnapshotRole] != "":
			snapshots = append(snapshots, c.Names[0])
		case c.State == "running":
			running = append(running, c.Names[0])
		default:
			other = append(other, c.Names[0])
		}
	}
	return running, snapshots, other
}

// containerLogs reads a container's output.
func (e *env) containerLogs(name string) string {
	e.t.Helper()
	rc, err := e.docker.ContainerLogs(context.Background(), strings.TrimPrefix(name, "/"), client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		e.t.Fatal(err)
	}
	defer rc.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, rc); err != nil {
		e.t.Fatal(err)
	}
	return b.String()
}

// TestSuspendedSessionWakesOnATurnWithItsWorkspace is issue 16's
// black-box test over the real binaries and engine: a Session that ran a
// Turn is suspended (here on request: SuspendSession), its container is
// gone, its node slot freed and its snapshot present; a new Turn wakes it
// and sees its 10 MB workspace byte-identical under the same Session;
// deleting it leaves nothing. A second Session, left idle, is suspended
// by the idle time alone and woken the same way. A third one, kept
// suspended past its snapshot's retention, expires (FAILED) and leaves
// nothing on the engine.
func TestSuspendedSessionWakesOnATurnWithItsWorkspace(t *testing.T) {
	e := newEnvSpec(t, suspendingSpec())
	st := e.core.Store(t)
	name := e.createSession()
	idle := e.createSession()
	// Before its first Turn ended a Session is not suspended on request
	// either: the idle suspension's rule, without the idle time.
	if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()}); stack.AdminReason(err) != "no_turn_ended" {
		t.Fatalf("SuspendSession before any Turn: %v, want no_turn_ended", err)
	}
	written := e.run(name, shell(workspaceScript))
	if written.turn.GetState() != adminv1.Turn_STATE_COMPLETED || len(written.stdout) < 64 {
		t.Fatalf("write: %v", written)
	}
	idleWritten := e.run(idle, shell(workspaceScript))
	idleEnded := time.Now()
	s := e.session(name)
	node := uuid.MustParse(strings.TrimPrefix(s.GetNode(), "nodes/"))

	// Suspend on request.
	start := time.Now()
	resp, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()})
	if err != nil {
		t.Fatalf("SuspendSession: %v", err)
	}
	if resp.GetSession().GetName() != name {
		t.Fatalf("SuspendSession answered %v", resp.GetSession())
	}
	s = e.waitPhase(name, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, time.Minute)
	t.Logf("suspend on request: %v", time.Since(start))
	if s.GetState() != adminv1.Session_STATE_ACTIVE || s.GetEnvironment().GetComputeAvailable() ||
		s.GetEnvironment().GetComputeReason() != "compute_suspended" || s.GetEnvironment().GetSnapshotExpireTime() == nil {
		t.Fatalf("suspended session %v", s)
	}
	running, snapshots, other := e.allocationContainers(s.GetAllocation())
	if len(running) != 0 || len(snapshots) != 1 || len(other) != 0 {
		t.Fatalf("containers of the suspended session: running %v, snapshots %v, other %v", running, snapshots, other)
	}
	// Its node slot is free (the idle Session still holds one).
	if held, err := st.NodeHeld(e.ctx, node); err != nil || held != 1 {
		t.Fatalf("node holds %d (%v), want 1", held, err)
	}
	if retained, err := st.NodeRetained(e.ctx, node); err != nil || retained != 1 {
		t.Fatalf("node retains %d (%v), want 1", retained, err)
	}

	// A Turn wakes it with its workspace.
	start = time.Now()
	read := e.run(name, shell("sha256sum /workspace/data"))
	t.Logf("queued turn to result on a suspended session: %v", time.Since(start))
	if read.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(read.stdout) != string(written.stdout) {
		t.Fatalf("after the wake: %v, want stdout %q", read, written.stdout)
	}
	s = e.session(name)
	if s.GetEnvironment().GetComputePhase() != adminv1.ComputePhase_COMPUTE_PHASE_RUNNING || !s.GetEnvironment().GetExecutionAdmitted() {
		t.Fatalf("woken session %v", s)
	}
	running, snapshots, other = e.allocationContainers(s.GetAllocation())
	if len(running) != 1 || !strings.HasSuffix(running[0], "-g2") || len(other) != 0 {
		t.Fatalf("containers after the wake: running %v, snapshots %v, other %v", running, snapshots, other)
	}
	// The restored Runtime started parked (its capture kept the park
	// marker) and connected only once Core's wake command signalled it.
	if logs := e.containerLogs(running[0]); !strings.Contains(logs, "parked for a planned suspension") {
		t.Fatalf("the restored runtime did not start parked:\n%s", logs)
	}
	stack.WaitFor(t, time.Minute, "the consumed snapshot deleted", func() bool {
		_, snapshots, _ := e.allocationContainers(s.GetAllocation())
		return len(snapshots) == 0
	})

	// The idle Session is suspended by its idle time alone, and wakes.
	is := e.waitPhase(idle, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, suspendIdle+time.Minute)
	t.Logf("idle to suspended: %v past the idle time", time.Since(idleEnded)-suspendIdle)
	if _, snapshots, _ := e.allocationContainers(is.GetAllocation()); len(snapshots) != 1 {
		t.Fatalf("snapshots of the idle session: %v", snapshots)
	}
	again := e.run(idle, shell("sha256sum /workspace/data"))
	if string(again.stdout) != string(idleWritten.stdout) {
		t.Fatalf("idle session after the wake: %v, want %q", again, idleWritten.stdout)
	}

	// A snapshot kept past its retention expires the Environment and
	// leaves nothing of it. The retention (an hour at the least) is
	// shortened by moving the recorded deadline to the database's now:
	// the only write the test makes behind Core's back, standing for the
	// hour passing.
	expiring := e.createSession()
	e.run(expiring, shell(workspaceScript))
	if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: expiring, RequestId: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	xs := e.waitPhase(expiring, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, time.Minute)
	if _, err := st.Pool().Exec(e.ctx, `UPDATE allocations SET retention_deadline = now() WHERE id = $1`,
		strings.TrimPrefix(xs.GetAllocation(), "allocations/")); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, time.Minute, "retention expiry", func() bool {
		s := e.session(expiring)
		running, snapshots, other := e.allocationContainers(xs.GetAllocation())
		return s.GetState() == adminv1.Session_STATE_FAILED && len(running)+len(snapshots)+len(other) == 0
	})
	if _, err := e.turns.SubmitTurn(e.ctx, &adminv1.SubmitTurnRequest{Parent: expiring, RequestId: uuid.NewString(), Turn: shell("true")}); stack.AdminReason(err) != "environment_ended" {
		t.Fatalf("a Turn on the expired session: %v", err)
	}

	// Deleting a suspended Session leaves nothing.
	if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: idle, RequestId: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	e.waitPhase(idle, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, time.Minute)
	for _, n := range []string{name, idle, expiring} {
		if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	stack.WaitFor(t, 2*time.Minute, "nothing left", func() bool {
		c, v := stack.Owned(t, e.docker, e.installationID)
		return c == 0 && v == 0
	})
}

// TestNodeHoldsSuspendedSessionsBeyondMaxActive: a node with max_active 2
// and max_retained 4 holds 2 running and 4 suspended Sessions (6 in all,
// where without suspension it held 2); a fifth suspension is refused by
// max_retained and that Session keeps running, a third running Session is
// refused by max_active, and waking a suspended Session needs a free
// active slot. Each Session runs a Turn first: a suspension needs one
// ended.
func TestNodeHoldsSuspendedSessionsBeyondMaxActive(t *testing.T) {
	spec := suspendingSpec()
	spec.MaxActive, spec.MaxRetained = 2, 4
	e := newEnvSpec(t, spec)
	var suspended []string
	for len(suspended) < 4 {
		name := e.createSession()
		e.run(name, shell("true"))
		if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()}); err != nil {
			t.Fatalf("SuspendSession: %v", err)
		}
		e.waitPhase(name, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, time.Minute)
		suspended = append(suspended, name)
	}
	running := []string{e.createSession(), e.createSession()}
	_, err := e.sessions.CreateSession(e.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if stack.AdminReason(err) != "no_ready_node_with_capacity" {
		t.Fatalf("a third running Session: %v", err)
	}
	// The retained slots are full: a requested suspension is armed never,
	// and the Session keeps running.
	e.run(running[0], shell("true"))
	if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: running[0], RequestId: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if s := e.session(running[0]); s.GetEnvironment().GetComputePhase() != adminv1.ComputePhase_COMPUTE_PHASE_RUNNING ||
		!s.GetEnvironment().GetExecutionAdmitted() {
		t.Fatalf("the fifth suspension: %v", s)
	}
	// The engine agrees: two running containers and four snapshot holders,
	// nothing else of the installation.
	var up, holders, rest int
	for _, a := range append(append([]string{}, running...), suspended...) {
		r, h, o := e.allocationContainers(e.session(a).GetAllocation())
		up, holders, rest = up+len(r), holders+len(h), rest+len(o)
	}
	if c, _ := stack.Owned(t, e.docker, e.installationID); up != 2 || holders != 4 || rest != 0 || c != up+holders {
		t.Fatalf("engine: %d running, %d snapshot holders, %d other containers of the Sessions, %d of the installation; want 2, 4, 0, 6",
			up, holders, rest, c)
	}
	t.Logf("one node: %d running and %d suspended Sessions under max_active %d and max_retained %d",
		len(running), len(suspended), spec.MaxActive, spec.MaxRetained)
	// A Turn on a suspended Session waits for an active slot: deleting a
	// running Session frees one, and the Turn completes.
	turn := e.submit(suspended[0], shell("echo woke"))
	time.Sleep(3 * time.Second)
	if s := e.session(suspended[0]); s.GetEnvironment().GetComputePhase() != adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED {
		t.Fatalf("woken without an active slot: %v", s)
	}
	if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: running[1]}); err != nil {
		t.Fatal(err)
	}
	if r := e.wait(turn); r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "woke\n" {
		t.Fatalf("the Turn after the slot was freed: %v", r)
	}
}
