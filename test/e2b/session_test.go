package e2b

import (
	"strings"
	"testing"
	"time"

	"berth.dev/sandbox/e2b/e2btest"

	"berth.dev/test/internal/stack"
)

// TestSessionAndTurnsOnE2B: berthctl commits an E2B deployment pointed at
// the fixture (the API key on stdin); a Session's sandbox runs the real
// berth-runtime, which connects back to Core's TLS gateway trusting the CA
// the adapter wrote beside the bootstrap file, and the Session becomes
// ACTIVE with its execution admitted. Turns through `berthctl turn run`
// give stdout byte for byte (a NUL included), stderr apart, stdin, the
// command's exit code, /workspace as the working directory and a
// workspace kept between Turns; the sandbox's root holds only
// berth-runtime in /usr/local/bin (its own root, not the host's). A Turn
// leaves a process that escaped its group (setsid): DeleteSession leaves
// the fixture with no sandbox and the OS process table with no process
// of the sandbox's namespace. A second Session beside it has a sandbox,
// namespace and workspace of its own, and its deletion leaves the first
// running. The API key is in no log and no argv.
func TestSessionAndTurnsOnE2B(t *testing.T) {
	e := newEnv(t, stack.CoreOptions{})
	e.commitE2B()

	session := e.createSession()
	alloc := e.waitActive(session)
	if alloc.GetNode() != "" || alloc.GetGeneration() != 1 {
		t.Fatalf("the Session's allocation: node %q, generation %d; want the direct lane (no node), generation 1", alloc.GetNode(), alloc.GetGeneration())
	}
	sb := e.sandboxOf(alloc.GetName())
	if sb.State != "running" || sb.Metadata["berth_installation"] != e.inst {
		t.Fatalf("the fixture's sandbox: %+v; want running, owned by installation %s", sb, e.inst)
	}
	ns := e.runtimeProcesses(sb, 2) // unshare and the Runtime

	out, errOut, code := e.turn(session, `printf 'a\000b\n'; printf to-stderr >&2; cat; pwd; exit 7`, []byte("line 1\nline 2\n"))
	if want := "a\x00b\nline 1\nline 2\n/workspace\n"; out != want || errOut != "to-stderr" || code != 7 {
		t.Fatalf("the Turn: stdout %q, stderr %q, exit %d; want stdout %q, stderr %q, exit 7", out, errOut, code, want, "to-stderr")
	}
	e.wantTurn(session, `echo kept > note; setsid sleep 600 </dev/null >/dev/null 2>&1 & echo started`, "started\n")
	e.wantTurn(session, `cat /workspace/note; ls /usr/local/bin`, "kept\nberth-runtime\n")

	// A second Session beside it gets a sandbox, a Runtime and a
	// workspace of its own.
	other := e.createSession()
	otherAlloc := e.waitActive(other)
	otherSB := e.sandboxOf(otherAlloc.GetName())
	otherNS := e.runtimeProcesses(otherSB, 2)
	if otherNS == ns || otherSB.ID == sb.ID {
		t.Fatalf("the second Session shares the first's sandbox or namespace (%s, %s)", otherSB.ID, otherNS)
	}
	e.wantTurn(other, `test ! -e /workspace/note && echo own-workspace`, "own-workspace\n")
	e.deleteSessions(other)
	stack.WaitFor(t, time.Minute, "the fixture holds the first Session's sandbox only", func() bool { return len(e.fixture.Sandboxes()) == 1 })
	e.waitNoProcesses(otherNS, otherSB.Dir)
	e.wantTurn(session, `cat /workspace/note`, "kept\n")
	left := processesIn(ns, sb.Dir)
	if len(left) < 3 || !strings.Contains(strings.Join(left, "\n"), "sleep 600") {
		t.Fatalf("the sandbox's processes before the deletion: %v; want unshare, the Runtime and the escaped sleep", left)
	}

	e.deleteSessions(session)
	stack.WaitFor(t, time.Minute, "the fixture holds no sandbox", func() bool { return len(e.fixture.Sandboxes()) == 0 })
	e.waitNoProcesses(ns, sb.Dir)
	if a := e.allocation(alloc.GetName()); a.GetState().String() != "STATE_RELEASED" {
		t.Errorf("the allocation after the deletion: %v, want RELEASED", a.GetState())
	}
	e.checkNoKey(2)
}

// TestLostCreateAnswerOnE2B: the fixture performs the Session's first
// create POST and drops the connection before answering, so the sandbox
// exists but its bootstrap was never delivered. Core never replays that
// create: the adapter settles the unknown outcome on evidence (the
// listing by metadata finds the sandbox, running, with no Runtime), Core
// observes it until --create-abandon-after (10 s in the stack), gives
// the allocation's create up (create_failed, RELEASED), kills its sandbox and places the Session on a new
// allocation of the lane, whose one create POST is answered: its Runtime
// connects and a Turn runs. Exactly one create POST per allocation, the
// lost one's sandbox killed before the second POST (docs/direct-lifecycle-
// plan.md §4: "one Create after a claim, never replayed after a lost
// answer; ... abandoned after CreateAbandonAfter → Kill → re-allocation").
func TestLostCreateAnswerOnE2B(t *testing.T) {
	e := newEnv(t, stack.CoreOptions{})
	e.commitE2B()
	e.fixture.Arm("create", e2btest.FaultLostAnswer, nil)

	session := e.createSession()
	alloc := e.waitActive(session)
	sb := e.sandboxOf(alloc.GetName())
	ns := e.runtimeProcesses(sb, 2)
	e.wantTurn(session, `echo after a lost answer`, "after a lost answer\n")

	var order []string // create and kill POSTs, in arrival order
	creates := map[string]int{}
	for _, r := range e.fixture.Requests() {
		switch r.Call {
		case "create":
			creates[r.Allocation]++
			order = append(order, "create "+r.Allocation)
		case "kill":
			order = append(order, "kill")
		}
	}
	lost := strings.TrimPrefix(order[0], "create ")
	current := strings.TrimPrefix(alloc.GetName(), "allocations/")
	if len(creates) != 2 || creates[lost] != 1 || creates[current] != 1 || lost == current {
		t.Fatalf("create POSTs by allocation: %v (the lost one %s, the Session's %s); want one each for two allocations", creates, lost, current)
	}
	if strings.Join(order, ",") != "create "+lost+",kill,create "+current {
		t.Fatalf("create and kill calls: %v; want the lost create, its sandbox's kill, then the new allocation's create", order)
	}
	if a := e.allocation("allocations/" + lost); !a.GetCreateFailed() || a.GetState().String() != "STATE_RELEASED" {
		t.Fatalf("the allocation whose create answer was lost: %v; want its create failed and RELEASED", a)
	}
	if n := len(e.fixture.Sandboxes()); n != 1 {
		t.Fatalf("the fixture holds %d sandboxes, want the Session's one (the lost create's killed)", n)
	}

	e.deleteSessions(session)
	stack.WaitFor(t, time.Minute, "the fixture holds no sandbox", func() bool { return len(e.fixture.Sandboxes()) == 0 })
	e.waitNoProcesses(ns, sb.Dir)
	e.checkNoKey(1)
}

// TestCoreRestartKeepsTheE2BSession: berth-core stops (SIGTERM) and starts
// again on the same database and state directory while an E2B Session
// runs. The new Core rebuilds the generation's adapter (ready again), the
// Session keeps its allocation, generation and sandbox (no second create
// POST, the same sandbox and Runtime process), the Runtime reconnects to
// the gateway by itself, and a Turn reads what a Turn before the restart
// wrote. Deleting the Session then leaves nothing.
func TestCoreRestartKeepsTheE2BSession(t *testing.T) {
	e := newEnv(t, stack.CoreOptions{})
	e.commitE2B()
	session := e.createSession()
	alloc := e.waitActive(session)
	sb := e.sandboxOf(alloc.GetName())
	ns := e.runtimeProcesses(sb, 2)
	e.wantTurn(session, `echo before-restart > note; cat note`, "before-restart\n")

	e.restartCore()
	e.waitDirectReady(1)
	after := e.waitActive(session)
	if after.GetName() != alloc.GetName() || after.GetGeneration() != 1 {
		t.Fatalf("the Session after the restart: %s generation %d; want %s generation 1", after.GetName(), after.GetGeneration(), alloc.GetName())
	}
	e.wantTurn(session, `cat /workspace/note`, "before-restart\n")
	if got := e.sandboxOf(alloc.GetName()); got.ID != sb.ID || len(e.fixture.Sandboxes()) != 1 || sandboxNamespace(sb.Dir) != ns {
		t.Fatalf("the fixture after the restart: %v; want the one sandbox %s with its Runtime", e.fixture.Sandboxes(), sb.ID)
	}
	creates := 0
	for _, r := range e.fixture.Requests() {
		if r.Call == "create" {
			creates++
		}
	}
	if creates != 1 {
		t.Fatalf("the fixture recorded %d create POSTs, want 1", creates)
	}
	if n := strings.Count(e.runtimeLog(sb), `"msg":"connected to core"`); n != 2 {
		t.Fatalf("the Runtime connected to Core %d times, want 2 (before and after the restart)", n)
	}

	e.deleteSessions(session)
	stack.WaitFor(t, time.Minute, "the fixture holds no sandbox", func() bool { return len(e.fixture.Sandboxes()) == 0 })
	e.waitNoProcesses(ns, sb.Dir)
	e.checkNoKey(1)
}
