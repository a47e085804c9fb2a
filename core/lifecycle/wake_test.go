package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/lifecycle"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
)

// Issue 26's wake rules (items 3, 4 and 8): an unknown restore is never
// redone on a failed or empty observation; deletion, revocation and
// retention expiry win over a wake at the restore's final write; a
// restored incarnation gets keepalives, and no restore starts while the
// provider is disabled.

// suspendedSession runs a Session on n through a whole capture: its
// allocation is suspended, its snapshot held, its source gone.
func (e *env) suspendedSession(t *testing.T, n *node, w *lifecycle.Worker) (store.SessionBundle, store.Allocation) {
	t.Helper()
	b := e.running(t, w, n)
	e.idle(t, n, b)
	pass(t, w)
	e.ack(t, e.wantPhase(t, b.Allocation.ID, store.PhaseQuiescing))
	pass(t, w)
	return b, e.wantPhase(t, b.Allocation.ID, store.PhaseSuspended)
}

// wakes counts the wake commands run in container name.
func wakes(n *node, name string) int {
	ct, ok := n.srv.Container(name)
	k := 0
	for _, x := range n.srv.Execs() {
		if ok && x.ContainerID == ct.ID && slices.Equal(x.Cmd, runtimebootstrap.WakeCommand()) {
			k++
		}
	}
	return k
}

// anyWake reports whether a wake command ran in any container.
func anyWake(n *node) bool {
	for _, x := range n.srv.Execs() {
		if slices.Equal(x.Cmd, runtimebootstrap.WakeCommand()) {
			return true
		}
	}
	return false
}

// connectTo opens a Runtime connection with the credential of the
// bootstrap file copied into container name: the Runtime of that
// incarnation connecting.
func (e *env) connectTo(t *testing.T, n *node, name string, b store.SessionBundle) store.RuntimeGrant {
	t.Helper()
	for _, ar := range n.srv.Archives(name) {
		for _, f := range ar.Entries {
			if !strings.HasSuffix(f.Header.Name, "runtime-bootstrap.json") {
				continue
			}
			var raw struct {
				Credential string `json:"credential"`
			}
			must(t, json.Unmarshal(f.Content, &raw))
			g, err := e.st.AcceptRuntime(context.Background(), store.AcceptRuntimeParams{
				ConnectionID: uuid.New(), DeviceID: b.Allocation.DeviceID,
				Credential: runtimebootstrap.NewSecret(raw.Credential), RuntimeVersion: "test",
			})
			must(t, err)
			return g
		}
	}
	t.Fatalf("no bootstrap file in %s", name)
	return store.RuntimeGrant{}
}

// hookErr keeps the first error of a fixture hook (it runs on the
// fixture's goroutine, where the test cannot fail).
type hookErr struct {
	mu  sync.Mutex
	err error
}

func (h *hookErr) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

func (h *hookErr) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		t.Fatalf("fixture hook: %v", h.err)
	}
}

// wantNothingLeft checks that the engine holds no container or volume of
// the allocation whose first incarnation is name.
func wantNothingLeft(t *testing.T, n *node, name string) {
	t.Helper()
	if got := containersOf(n, name); len(got) != 0 {
		t.Fatalf("containers left: %v", got)
	}
	for _, v := range n.srv.Volumes() {
		if strings.HasPrefix(v.Name, name) {
			t.Fatalf("volume left: %s", v.Name)
		}
	}
}

// TestDeletionDuringARestoreWinsOverTheWake (item 4): a Session deleted
// while its restore runs is not recorded restored and its restored
// Runtime is never woken; cleanup removes every incarnation and the
// snapshot and releases the allocation.
func TestDeletionDuringARestoreWinsOverTheWake(t *testing.T) {
	e, n, w := suspending(t, time.Hour, 4, 4)
	b, _ := e.suspendedSession(t, n, w)
	name := n.p.Name(b.Allocation.Reference())
	e.submit(t, b)
	var hook hookErr
	// The engine starts the restored incarnation; meanwhile the Session is
	// deleted (its device revoked, its cleanup requested).
	n.srv.Arm(dockertest.CallContainerStart, dockertest.FaultHookAfterDispatch, func() {
		_, err := e.svc.Delete(context.Background(), projects.All(), b.Session.ID)
		hook.set(err)
	})
	pass(t, w)
	hook.check(t)
	a := e.alloc(t, b.Allocation.ID)
	if a.ComputePhase == store.PhaseRunning || a.Suspension.RestoredAt != nil {
		t.Fatalf("a restore was recorded after the Session's deletion: phase %s, state %s", a.ComputePhase, a.State)
	}
	if anyWake(n) {
		t.Fatal("a wake was sent after the Session's deletion")
	}
	for range 4 {
		pass(t, w)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationReleased {
		t.Fatalf("after deletion: %s", a.State)
	}
	wantNothingLeft(t, n, name)
}

// TestRetentionExpiryDuringARestoreWinsOverTheWake (item 4): a restore
// that completes after the snapshot's retention deadline (database clock)
// is not recorded, its Runtime is never woken, and the Environment
// expires: its queued Turn ends with environment_expired and cleanup
// leaves nothing.
func TestRetentionExpiryDuringARestoreWinsOverTheWake(t *testing.T) {
	e, n, w := suspending(t, 4*time.Second, 4, 4)
	b, _ := e.suspendedSession(t, n, w)
	name := n.p.Name(b.Allocation.Reference())
	turn := e.submit(t, b)
	var hook hookErr
	// The engine starts the restored incarnation and answers only once the
	// retention deadline has passed by the database clock.
	n.srv.Arm(dockertest.CallContainerStart, dockertest.FaultHookAfterDispatch, func() {
		for range 400 {
			var passed bool
			if err := e.st.Pool().QueryRow(context.Background(),
				`SELECT retention_deadline <= now() FROM allocations WHERE id = $1`, b.Allocation.ID).Scan(&passed); err != nil {
				hook.set(err)
				return
			}
			if passed {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		hook.set(errors.New("the retention deadline never passed"))
	})
	pass(t, w)
	hook.check(t)
	a := e.alloc(t, b.Allocation.ID)
	if a.ComputePhase == store.PhaseRunning || a.Suspension.RestoredAt != nil {
		t.Fatalf("a restore was recorded after the retention deadline: phase %s, state %s", a.ComputePhase, a.State)
	}
	if anyWake(n) {
		t.Fatal("a wake was sent after the retention deadline")
	}
	for range 4 {
		pass(t, w)
	}
	got := e.bundle(t, b)
	if got.Environment.State != store.EnvironmentExpired {
		t.Fatalf("environment %s, want expired", got.Environment.State)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationReleased {
		t.Fatalf("allocation %s, want released", a.State)
	}
	tr, err := e.st.GetTurn(context.Background(), turn)
	must(t, err)
	if tr.FailureCode != store.TurnFailureEnvironmentExpired {
		t.Fatalf("queued turn %s %q", tr.State, tr.FailureCode)
	}
	wantNothingLeft(t, n, name)
}

// TestAFailedRestoreObservationNeverAbandonsTheRestore (item 3): a
// restore whose answer was lost (the Runtime's start dropped) and whose
// observation then fails is kept unknown past RestoreAbandonAfter: an
// observation failure is no observation, nothing is owed to cleanup and
// nothing is restored again. Once the observation finds the attempt's
// exact incarnation (created, not running) the restore is abandoned, that
// incarnation is removed by its id, and only then is the next one made.
func TestAFailedRestoreObservationNeverAbandonsTheRestore(t *testing.T) {
	e, n, _ := suspending(t, time.Hour, 4, 4)
	e.cfg.RestoreAbandonAfter = time.Second
	w := lifecycle.NewWorker(e.cfg, n.id)
	b, _ := e.suspendedSession(t, n, w)
	name := n.p.Name(b.Allocation.Reference())
	e.submit(t, b)
	n.srv.Arm(dockertest.CallContainerStart, dockertest.FaultDrop, nil)
	pass(t, w)
	sent := e.wantPhase(t, b.Allocation.ID, store.PhaseRestoring)
	if sent.Suspension.RestoreSentAt == nil {
		t.Fatal("the restore was not sent")
	}
	target, ok := n.srv.Container(name + "-g2")
	if !ok || target.State == dockertest.StateRunning {
		t.Fatalf("the lost restore's target: %+v %v", target, ok)
	}
	time.Sleep(e.cfg.RestoreAbandonAfter + 300*time.Millisecond)
	creates := count(n.srv, dockertest.CallContainerCreate)
	// The observation of the overdue restore fails.
	n.srv.Arm(dockertest.CallContainerInspect, dockertest.FaultDrop, nil)
	pass(t, w)
	a := e.wantPhase(t, b.Allocation.ID, store.PhaseRestoring)
	if a.Suspension.RestoreOperation == nil || *a.Suspension.RestoreOperation != *sent.Suspension.RestoreOperation {
		t.Fatalf("restore operation %v, want %v", a.Suspension.RestoreOperation, *sent.Suspension.RestoreOperation)
	}
	if left, err := e.st.ListOwedLeftovers(context.Background(), a); err != nil || len(left) != 0 {
		t.Fatalf("leftovers after a failed observation: %+v %v", left, err)
	}
	if k := count(n.srv, dockertest.CallContainerCreate); k != creates {
		t.Fatalf("%d containers created after a failed observation", k-creates)
	}
	if _, ok := n.srv.Container(target.ID); !ok {
		t.Fatal("the lost restore's target was removed on a failed observation")
	}

	// The observation finds the attempt's incarnation, never started: the
	// restore is abandoned, that exact container removed, and the next
	// restore goes to a later incarnation after it.
	n.srv.ResetCalls()
	for range 3 {
		pass(t, w)
	}
	restored := e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
	if restored.ComputeGeneration != 3 || restored.ComputeName != name+"-g3" {
		t.Fatalf("restored into %d %s, want generation 3", restored.ComputeGeneration, restored.ComputeName)
	}
	removed, created := -1, -1
	for i, c := range n.srv.Calls() {
		switch {
		case c.Name == dockertest.CallContainerRemove && strings.Contains(c.Path, target.ID):
			removed = i
		case c.Name == dockertest.CallContainerCreate && c.Query.Get("name") == name+"-g3":
			created = i
		}
	}
	if removed < 0 || created < 0 || removed > created {
		t.Fatalf("the abandoned target removed at call %d, the next incarnation created at %d: %v", removed, created, n.srv.CallNames())
	}
	if _, ok := n.srv.Container(name + "-g2"); ok {
		t.Fatal("the abandoned target is left")
	}
}

// TestARestoreObservedAbsentIsClaimedBeforeItIsRedone (item 3): a
// restore whose target's create was lost (the engine never made the
// container) is observed absent. "Not found" is only a missing
// observation: before RestoreAbandonAfter nothing happens; after it the
// worker claims the target's name (KillCompute: the adapter's tombstone),
// and only the target's absence receipt that a later observation returns
// abandons the restore, which is then redone into the next incarnation.
// The claim stays (the adapter removes it once the engine proves it
// unneeded); deletion cleans up everything else.
func TestARestoreObservedAbsentIsClaimedBeforeItIsRedone(t *testing.T) {
	e, n, _ := suspending(t, time.Hour, 4, 4)
	e.cfg.RestoreAbandonAfter = 2 * time.Second
	w := lifecycle.NewWorker(e.cfg, n.id)
	b, _ := e.suspendedSession(t, n, w)
	name := n.p.Name(b.Allocation.Reference())
	e.submit(t, b)
	n.srv.Arm(dockertest.CallContainerCreate, dockertest.FaultDrop, nil)
	pass(t, w)
	sent := e.wantPhase(t, b.Allocation.ID, store.PhaseRestoring)
	if _, ok := n.srv.Container(name + "-g2"); ok {
		t.Fatal("the dropped create made a container")
	}
	// Not yet overdue: observed, never claimed, never redone.
	for range 3 {
		pass(t, w)
	}
	a := e.wantPhase(t, b.Allocation.ID, store.PhaseRestoring)
	if *a.Suspension.RestoreOperation != *sent.Suspension.RestoreOperation || a.ComputeGeneration != 2 {
		t.Fatalf("restore %v generation %d, want the first attempt's", *a.Suspension.RestoreOperation, a.ComputeGeneration)
	}
	if got := containersOf(n, name+"-g"); len(got) != 0 {
		t.Fatalf("containers under the target's names before the restore is overdue: %v", got)
	}

	time.Sleep(e.cfg.RestoreAbandonAfter)
	for range 4 {
		pass(t, w)
	}
	claim, ok := n.srv.Container(name + "-g2")
	if !ok || claim.Labels[docker.LabelTombstone] != "1" || claim.State != dockertest.StateCreated {
		t.Fatalf("the overdue target's name is not claimed by a never-started tombstone (found %v, labels %v, state %q)", ok, claim.Labels, claim.State)
	}
	a = e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
	if a.ComputeGeneration != 3 || a.ComputeName != name+"-g3" {
		t.Fatalf("after the receipt: generation %d %q, want the next incarnation %s-g3", a.ComputeGeneration, a.ComputeName, name)
	}
	if left, err := e.st.ListOwedLeftovers(context.Background(), a); err != nil || len(left) != 0 {
		t.Fatalf("leftovers owed for a target abandoned on its receipt: %+v %v", left, err)
	}

	_, err := e.svc.Delete(context.Background(), projects.All(), b.Session.ID)
	must(t, err)
	for range 4 {
		pass(t, w)
	}
	if a := e.alloc(t, b.Allocation.ID); a.State != store.AllocationReleased {
		t.Fatalf("after deletion: %s", a.State)
	}
	if got := containersOf(n, name); !slices.Equal(got, []string{name + "-g2"}) {
		t.Fatalf("after deletion the engine holds %v, want only the target's claim", got)
	}
}

// TestARestoredIncarnationGetsKeepalives (item 8): a restored incarnation
// whose Runtime is connected gets service keepalives between Turns like a
// first incarnation (for an exact incarnation, GetCompute: a checkpointing
// backend has no native lease to extend), and the lapse of the previous
// incarnation (no keepalive for over an hour while suspended) is not the
// new one's.
func TestARestoredIncarnationGetsKeepalives(t *testing.T) {
	e, n, _ := suspending(t, time.Hour, 4, 4)
	e.cfg.ObservePeriod, e.cfg.KeepaliveInterval = time.Hour, time.Hour
	w := lifecycle.NewWorker(e.cfg, n.id)
	b, _ := e.suspendedSession(t, n, w)
	name := n.p.Name(b.Allocation.Reference())
	// Suspended for hours: the first incarnation's last keepalive is old.
	_, err := e.st.Pool().Exec(context.Background(),
		`UPDATE allocations SET keepalive_at = now() - interval '3 hours' WHERE id = $1`, b.Allocation.ID)
	must(t, err)
	e.submit(t, b)
	pass(t, w)
	restored := e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
	e.connectTo(t, n, name+"-g2", b)
	pass(t, w)
	pass(t, w)
	a := e.alloc(t, b.Allocation.ID)
	if a.Observation.KeepaliveAt == nil || a.Observation.KeepaliveAt.Before(*restored.Suspension.RestoredAt) {
		t.Fatalf("the restored incarnation got no keepalive: keepalive at %v, restored at %v", a.Observation.KeepaliveAt, *restored.Suspension.RestoredAt)
	}
	if a.Observation.Compute != store.ObservedRunning {
		t.Fatalf("observed %+v", a.Observation)
	}
	if wakes(n, name+"-g2") != 1 {
		t.Fatalf("%d wakes of the restored incarnation, want 1", wakes(n, name+"-g2"))
	}
}

// TestNoRestoreWhileTheProviderIsDisabled (item 8): while the provider is
// disabled a suspended Session with a queued Turn is not restored (a
// restore is a bootstrap, like a Create); enabled again, it is.
func TestNoRestoreWhileTheProviderIsDisabled(t *testing.T) {
	e, n, w := suspending(t, time.Hour, 4, 4)
	b, _ := e.suspendedSession(t, n, w)
	ctx := context.Background()
	_, err := e.st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	creates := count(n.srv, dockertest.CallContainerCreate) + count(n.srv, dockertest.CallVolumeCreate)
	e.submit(t, b)
	for range 2 {
		pass(t, w)
	}
	e.wantPhase(t, b.Allocation.ID, store.PhaseSuspended)
	if k := count(n.srv, dockertest.CallContainerCreate) + count(n.srv, dockertest.CallVolumeCreate); k != creates {
		t.Fatalf("%d creating calls while the provider is disabled", k-creates)
	}
	_, err = e.st.SetProviderDisabled(ctx, false, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	pass(t, w)
	e.wantPhase(t, b.Allocation.ID, store.PhaseRunning)
}
