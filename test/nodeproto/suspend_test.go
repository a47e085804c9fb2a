package nodeproto

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/lifecycle"
	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/suspension"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"

	"berth.dev/test/internal/stack"
)

// TestAFailedCaptureCheckRollsNothingBack is issue 26's item 5 across the
// real node boundary: Core's lifecycle worker (real PostgreSQL) drives a
// real berth-nodeagent over the Docker fixture. A capture completes on the
// engine (its snapshot's holder is created) but its answer is lost (the
// engine withholds it until Core's call times out); the observe-only check
// that follows fails in transport too (the engine withholds the holder's
// inspect). That failed check answers nothing: the source is not thawed,
// nothing is rolled back, and the next check records the snapshot that
// did complete as the Session's, counted in max_retained. Deletion then
// leaves nothing of the allocation on the engine.
func TestAFailedCaptureCheckRollsNothingBack(t *testing.T) {
	_, engine, n := startFixtureNode(t)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	ctx := context.Background()
	base := storetest.New(t)
	inst, err := base.ClaimInstallation(ctx, uuid.New(), "https://core.berth.test")
	must(t, err)
	st := storetest.Owner(t, base)
	key, _, err := secrets.NewKey()
	must(t, err)
	const idle = time.Second
	_, err = st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: docker.Kind, PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{Resources: stack.Resources, MaxActive: 4, MaxRetained: 4,
			Suspension: sandbox.SuspensionPolicy{Idle: idle, Retention: time.Hour}},
	})
	must(t, err)
	node := storetest.EnabledNode(t, st)
	gen, err := st.CurrentGeneration(ctx)
	must(t, err)
	storetest.Present(t, st, node, gen.Generation)
	susp := suspension.New(st, nil)
	w := lifecycle.NewWorker(lifecycle.Config{
		Store: st, Suspension: susp, Key: key, Installation: inst,
		Provider:    func(uuid.UUID) (sandbox.SandboxProvider, error) { return proxy, nil },
		CallTimeout: 5 * time.Second, Interval: 20 * time.Millisecond,
	}, node)
	pass := func() {
		t.Helper()
		must(t, w.Pass(ctx))
	}
	phase := func(id uuid.UUID, want store.ComputePhase) store.Allocation {
		t.Helper()
		a, err := st.GetAllocation(ctx, id)
		must(t, err)
		if a.ComputePhase != want {
			t.Fatalf("phase %s, want %s (state %s)", a.ComputePhase, want, a.State)
		}
		return a
	}

	b, err := sessions.New(st, key, inst.ID, uuid.New, susp, nil).Create(ctx, projects.All(), sessions.CreateRequest{
		RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "capture"})
	must(t, err)
	for range 3 {
		pass()
	}
	ref := b.Allocation.Reference()
	name := docker.ResourceName(n.Inst.ID, ref)
	if a, _ := st.GetAllocation(ctx, b.Allocation.ID); a.State != store.AllocationRunning {
		t.Fatalf("allocation %s, want running", a.State)
	}

	// One Turn ends on the Runtime's connection; the Session idles.
	script := "true"
	turn := uuid.New()
	_, _, err = st.SubmitTurn(ctx, store.SubmitTurnParams{
		ID: turn, SessionID: b.Session.ID, RequestID: uuid.New(), RequestDigest: make([]byte, 32),
		ShellScript: &script, WorkingDirectory: "/workspace",
		Input:   store.SealedCredential{Ciphertext: make([]byte, 20), Nonce: make([]byte, 12)},
		Timeout: time.Minute, QueueTimeout: time.Minute, MaxOutputBytes: 10,
	})
	must(t, err)
	g, err := st.AcceptRuntime(ctx, store.AcceptRuntimeParams{
		ConnectionID: uuid.New(), DeviceID: b.Allocation.DeviceID,
		Credential: runtimebootstrap.NewSecret(bootstrapCredential(t, engine, name)), RuntimeVersion: "test",
	})
	must(t, err)
	_, err = st.MarkRuntimePrepared(ctx, g.Conn)
	must(t, err)
	if _, ok, err := st.ClaimNextTurn(ctx, g.Conn); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	code := int32(0)
	_, err = st.FinishTurn(ctx, turn, g.Conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code})
	must(t, err)
	time.Sleep(idle + 200*time.Millisecond)

	pass()
	armed := phase(b.Allocation.ID, store.PhaseQuiescing)
	_, err = st.RecordQuiesceAck(ctx, armed.ID, *armed.Suspension.Operation)
	must(t, err)
	snapshot := docker.SnapshotResourceName(n.Inst.ID, ref, armed.Suspension.Operation.String())

	// The capture: the engine creates the capture container, copies, and
	// creates the holder, whose answer it withholds until Core's call
	// times out.
	engine.Arm(dockertest.CallContainerCreate, dockertest.FaultHookAfterDispatch, func() {
		engine.Arm(dockertest.CallContainerCreate, dockertest.FaultCancelAfterDispatch, nil)
	})
	pass()
	phase(b.Allocation.ID, store.PhaseSuspending)
	if h, ok := engine.Container(snapshot); !ok || h.Labels[docker.LabelSnapshotRole] != "holder" {
		t.Fatalf("the capture's holder: %+v %v", h, ok)
	}
	if src, _ := engine.Container(name); src.State != dockertest.StatePaused {
		t.Fatalf("source %s, want paused", src.State)
	}

	// The check: its first read, the holder's inspect, is withheld until
	// Core's call times out.
	engine.ResetCalls()
	engine.Arm(dockertest.CallContainerInspect, dockertest.FaultCancelAfterDispatch, nil)
	pass()
	phase(b.Allocation.ID, store.PhaseSuspending)
	if src, _ := engine.Container(name); src.State != dockertest.StatePaused {
		t.Fatalf("source %s after a failed capture check, want paused (not thawed)", src.State)
	}
	if got := count(engine.CallNames(), dockertest.CallContainerUnpause); got != 0 {
		t.Fatalf("the source was thawed %d times on a failed check", got)
	}

	// The next check finds the complete snapshot: recorded, the source
	// torn down, the snapshot counted in max_retained.
	pass()
	suspended := phase(b.Allocation.ID, store.PhaseSuspended)
	if suspended.Suspension.Snapshot.ID != snapshot {
		t.Fatalf("snapshot %q recorded, want the capture's %q", suspended.Suspension.Snapshot.ID, snapshot)
	}
	if _, ok := engine.Container(name); ok {
		t.Fatal("the source is still there")
	}
	if r, err := st.NodeRetained(ctx, node); err != nil || r != 1 {
		t.Fatalf("node retains %d %v, want 1", r, err)
	}

	_, err = sessions.New(st, key, inst.ID, uuid.New, susp, nil).Delete(ctx, projects.All(), b.Session.ID)
	must(t, err)
	for range 4 {
		pass()
	}
	if a, _ := st.GetAllocation(ctx, b.Allocation.ID); a.State != store.AllocationReleased {
		t.Fatalf("after deletion: %s", a.State)
	}
	for _, c := range engine.Containers() {
		if strings.HasPrefix(c.Name, name) && c.Labels[docker.LabelTombstone] == "" {
			t.Fatalf("container left: %s", c.Name)
		}
	}
}

// bootstrapCredential reads the Runtime credential of the bootstrap file
// copied into container name.
func bootstrapCredential(t *testing.T, engine *dockertest.Server, name string) string {
	t.Helper()
	for _, ar := range engine.Archives(name) {
		for _, f := range ar.Entries {
			if !strings.HasSuffix(f.Header.Name, "runtime-bootstrap.json") {
				continue
			}
			var raw struct {
				Credential string `json:"credential"`
			}
			must(t, json.Unmarshal(f.Content, &raw))
			return raw.Credential
		}
	}
	t.Fatalf("no bootstrap file in %s", name)
	return ""
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
