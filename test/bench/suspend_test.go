package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"
)

// workspaceScript is P8's workload: 10 MB of random bytes written into
// the workspace, and their digest printed.
const workspaceScript = "head -c 10000000 /dev/urandom > /workspace/data && sha256sum /workspace/data"

// suspensionRows measures P8 on the rig's cluster, whose deployment
// suspends after spec's idle time: per sample a Session writes a 10 MB
// workspace, is suspended on request (P8a) and woken by a Turn that reads
// the workspace back (P8b); then idleSamples Sessions are left idle at
// staggered times and suspended by the idle time alone (P8c).
func (r *rig) suspensionRows(samples int) []*row {
	r.t.Helper()
	image := testenv.RuntimeImage(r.t)
	p8a := &row{ID: "P8a", Kind: latency, Goal: 4,
		Measure:  "SuspendSession to SUSPENDED, 10 MB workspace (quiesce, capture, source removed)",
		Baseline: "engine: copy the same volumes' bytes into new volumes (P7's)"}
	p8b := &row{ID: "P8b", Kind: latency, Goal: 2,
		Measure:  "Turn on a suspended Session, submit to result (restore, wake, reconnect, run)",
		Baseline: "engine: P7's copy, then P1's container start until its first process reaches a host listener"}
	for range samples {
		_, name := r.admitted()
		digest := r.runShell(name, workspaceScript)
		start := time.Now()
		if _, err := r.sessions.SuspendSession(r.ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()}); err != nil {
			r.t.Fatalf("SuspendSession: %v", err)
		}
		r.waitPhase(name, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED)
		suspended := time.Since(start)
		holder := r.snapshotHolder(name)
		p8a.add(suspended, engineCopy(r.t, r.cluster.Engine, image, holder), 0)
		listening, _, _, _ := r.engineListening()
		baseline := engineCopy(r.t, r.cluster.Engine, image, holder) + listening
		start = time.Now()
		if got := r.runShell(name, "sha256sum /workspace/data"); got != digest {
			r.t.Fatalf("the workspace after the wake: %q, want %q", got, digest)
		}
		p8b.add(time.Since(start), baseline, 0)
		r.deleteSession(name)
	}
	return []*row{p8a, p8b, r.idleRow(min(samples, idleSamples))}
}

// idleSamples caps P8c's Sessions: they are idle at once, spread over the
// rig's nodes' max_active slots.
const idleSamples = 10

// idleStagger separates the P8c Sessions' last Turns, so that their
// captures do not queue behind each other on one node's serial worker.
const idleStagger = 3 * time.Second

// idleRow is P8c: k Sessions each run a Turn, idleStagger apart, and are
// then left alone; each sample is how long after its idle time (counted
// from its Turn's result here, a little after Core's own record) the
// Session was reported SUSPENDED.
func (r *rig) idleRow(k int) *row {
	r.t.Helper()
	idle := spec.GetSuspension().GetIdle().AsDuration()
	p8c := &row{ID: "P8c", Kind: bound, Goal: 5,
		Measure:  fmt.Sprintf("idle to SUSPENDED past the %v idle time, at Core's default intervals", idle),
		Baseline: fmt.Sprintf("none, a bound: %d Sessions left idle %v apart", k, idleStagger)}
	names := make([]string, k)
	for i := range names {
		_, names[i] = r.admitted()
	}
	due := make(map[string]time.Time, k)
	for i, name := range names {
		if i > 0 {
			time.Sleep(idleStagger)
		}
		r.runShell(name, "true")
		due[name] = time.Now().Add(idle)
	}
	deadline := time.Now().Add(idle + sampleTimeout)
	for len(due) > 0 {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d Sessions not suspended by their idle time", len(due))
		}
		for name, at := range due {
			if r.phase(name) == adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED {
				p8c.add(max(time.Since(at), time.Millisecond), 0, 0)
				delete(due, name)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, name := range names {
		r.deleteSession(name)
	}
	return p8c
}

// phase reads a Session's compute phase.
func (r *rig) phase(name string) adminv1.ComputePhase {
	r.t.Helper()
	g, err := r.sessions.GetSession(r.ctx, &adminv1.GetSessionRequest{Name: name})
	if err != nil {
		r.t.Fatalf("GetSession: %v", err)
	}
	return g.GetSession().GetEnvironment().GetComputePhase()
}

// waitPhase polls a Session until its compute phase is want.
func (r *rig) waitPhase(name string, want adminv1.ComputePhase) {
	r.t.Helper()
	deadline := time.Now().Add(sampleTimeout)
	for r.phase(name) != want {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s never %v", name, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// snapshotHolder is the engine's id of a suspended Session's snapshot
// holder.
func (r *rig) snapshotHolder(session string) string {
	r.t.Helper()
	g, err := r.sessions.GetSession(r.ctx, &adminv1.GetSessionRequest{Name: session})
	if err != nil {
		r.t.Fatal(err)
	}
	allocation := strings.TrimPrefix(g.GetSession().GetAllocation(), "allocations/")
	cs, err := r.cluster.Engine.ContainerList(r.ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", docker.LabelAllocation+"="+allocation).Add("label", docker.LabelSnapshotRole+"=holder")})
	if err != nil || len(cs.Items) != 1 {
		r.t.Fatalf("the Session's snapshot holder: %d found, %v", len(cs.Items), err)
	}
	return cs.Items[0].ID
}

// runShell runs a shell Turn to its end (runTurn) and returns its
// standard output.
func (r *rig) runShell(session, script string) string {
	r.t.Helper()
	out, _ := r.runTurn(session, &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: script}})
	return out
}
