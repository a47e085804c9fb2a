package e2b

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/e2b/e2btest"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// env is one installation: a real berth-core with its Runtime gateway,
// the E2B fixture whose sandboxes run the real berth-runtime
// (sandboxRunner), and berthctl as the operator.
type env struct {
	t        *testing.T
	fixture  *e2btest.Fixture
	core     *stack.Core
	cc       *grpc.ClientConn
	ctx      context.Context
	inst     string
	logDir   string // the Runtimes' logs, one file a sandbox
	ctlHome  string
	sessions adminv1.SessionServiceClient
	turns    adminv1.TurnServiceClient
	allocs   adminv1.AllocationServiceClient
	deploys  adminv1.DeploymentServiceClient

	dsn, stateDir string
	opts          stack.CoreOptions

	mu       sync.Mutex
	ctlOut   []string // everything berthctl printed
	coreLogs []string // the logs of the Cores restartCore stopped
}

// newEnv starts the fixture and Core with opts (which must serve a
// Runtime gateway). With opts zero, the gateway serves TLS from the
// installation CA on a free loopback port: the adapter writes that CA
// into the sandbox beside the bootstrap file.
func newEnv(t *testing.T, opts stack.CoreOptions) *env {
	t.Helper()
	requireNamespaces(t)
	e := &env{t: t, logDir: t.TempDir(), ctlHome: t.TempDir()}
	e.fixture = e2btest.Start(t)
	e.fixture.Runner = sandboxRunner(t, e.logDir)
	if opts.RuntimeListen == "" {
		addr := stack.FreeAddrOn(t, "127.0.0.1")
		opts.PublicURL, opts.RuntimeListen = "https://"+addr, addr
	}
	e.dsn, e.stateDir, e.opts = storetest.NewDatabase(t), stack.CoreStateDir(t), opts
	e.startCore()
	e.inst = stack.InstallationID(t, e.ctx, e.cc)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", e.core.Logs())
			t.Logf("the Runtimes' logs:\n%s", e.runtimeLogs())
			t.Logf("fixture requests: %v", e.fixture.Requests())
		}
	})
	return e
}

// startCore starts berth-core on the env's database, state directory and
// options, and dials its admin API.
func (e *env) startCore() {
	e.t.Helper()
	e.core = stack.StartCoreWith(e.t, e.dsn, e.stateDir, true, e.opts)
	e.cc, e.ctx = e.core.AdminClient(e.t)
	e.sessions = adminv1.NewSessionServiceClient(e.cc)
	e.turns = adminv1.NewTurnServiceClient(e.cc)
	e.allocs = adminv1.NewAllocationServiceClient(e.cc)
	e.deploys = adminv1.NewDeploymentServiceClient(e.cc)
}

// restartCore stops Core (SIGTERM) and starts it again on the same
// database, state directory and Runtime gateway address, keeping the
// stopped one's log for the credential scan.
func (e *env) restartCore() {
	e.t.Helper()
	e.core.Stop()
	e.mu.Lock()
	e.coreLogs = append(e.coreLogs, e.core.Logs())
	e.mu.Unlock()
	e.startCore()
}

// e2bCandidate is the E2B candidate berthctl reads from stdin: the
// fixture's endpoints and template, and its API key as the credential.
func (e *env) e2bCandidate() []byte {
	e.t.Helper()
	public, err := structpb.NewStruct(map[string]any{"api_url": e.fixture.URL, "sandbox_url": e.fixture.URL, "template": e2btest.Template})
	if err != nil {
		e.t.Fatal(err)
	}
	cred, err := structpb.NewStruct(map[string]any{"api_key": e.fixture.Key})
	if err != nil {
		e.t.Fatal(err)
	}
	data, err := protojson.Marshal(&adminv1.DeploymentCandidate{ProviderKind: "e2b", Configuration: public, Credential: cred, Specification: spec()})
	if err != nil {
		e.t.Fatal(err)
	}
	return data
}

// spec is every generation's specification: Docker's resources, without
// suspension (E2B declares checkpoints unsupported).
func spec() *adminv1.Specification {
	s := stack.DefaultSpecification()
	s.Suspension = &adminv1.SuspensionPolicy{Disabled: true}
	return s
}

// commitE2B commits the E2B deployment with berthctl (the credential on
// stdin) and waits until Core built and probed its adapter.
func (e *env) commitE2B() {
	e.t.Helper()
	if out, errOut, code := e.ctl(e.e2bCandidate(), "deployment", "commit", "-f", "-"); code != 0 {
		e.t.Fatalf("berthctl deployment commit of the E2B candidate: exit %d\n%s%s", code, out, errOut)
	}
	e.waitDirectReady(1)
}

// waitDirectReady waits until the deployment's direct generation
// generation is ready (its adapter built and probed).
func (e *env) waitDirectReady(generation uint64) {
	e.t.Helper()
	stack.WaitFor(e.t, time.Minute, "the E2B generation ready", func() bool {
		r, err := e.deploys.GetDeployment(e.ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, g := range r.GetDeployment().GetDirectGenerations() {
			if g.GetGeneration() == generation && g.GetReady() {
				return true
			}
		}
		return false
	})
}

// ctl runs berthctl as the operator (the admin address and token file in
// its environment) with stdin (nil: none), to its end; it keeps what it
// printed for the credential scan.
func (e *env) ctl(stdin []byte, args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, stack.BerthctlBin(), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.ctlHome, "BERTHCTL_CONFIG=" + filepath.Join(e.ctlHome, "berthctl.json"),
		"BERTH_ADMIN_ADDRESS=" + e.core.AdminAddr(), "BERTH_ADMIN_TOKEN_FILE=" + filepath.Join(e.core.StateDir, "admin-token")}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		e.t.Fatalf("berthctl %v: %v", args, err)
	}
	e.mu.Lock()
	e.ctlOut = append(e.ctlOut, out.String(), errOut.String())
	e.mu.Unlock()
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// turn runs script as a Turn of session through `berthctl turn run
// --shell` with stdin, and returns what it printed and its exit code (the
// command's).
func (e *env) turn(session, script string, stdin []byte) (stdout, stderr string, code int) {
	e.t.Helper()
	if stdin == nil {
		stdin = []byte{}
	}
	return e.ctl(stdin, "turn", "run", session, "--shell", script)
}

// wantTurn runs a Turn and requires its stdout byte for byte and exit 0.
func (e *env) wantTurn(session, script, want string) {
	e.t.Helper()
	out, errOut, code := e.turn(session, script, nil)
	if out != want || code != 0 {
		e.t.Fatalf("Turn %q in %s: stdout %q, stderr %q, exit %d; want stdout %q, exit 0", script, session, out, errOut, code, want)
	}
}

// createSession creates a Session through the admin API and returns its
// name.
func (e *env) createSession() string {
	e.t.Helper()
	r, err := e.sessions.CreateSession(e.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		e.t.Fatalf("CreateSession: %v", err)
	}
	return r.GetSession().GetName()
}

// waitActive waits until session is ACTIVE with its execution admitted
// (its Runtime connected) and its allocation ACTIVE and settled, and
// returns the allocation.
func (e *env) waitActive(session string) *adminv1.Allocation {
	e.t.Helper()
	var a *adminv1.Allocation
	var last *adminv1.Session
	defer func() {
		if e.t.Failed() {
			e.t.Logf("%s when the wait ended: %v; its allocation: %v", session, last, a)
		}
	}()
	stack.WaitFor(e.t, time.Minute, session+" ACTIVE with its Runtime connected", func() bool {
		s, err := e.sessions.GetSession(e.ctx, &adminv1.GetSessionRequest{Name: session})
		if err != nil {
			e.t.Fatal(err)
		}
		last = s.GetSession()
		if name := last.GetAllocation(); name != "" {
			a = e.allocation(name)
		}
		if s.GetSession().GetState() == adminv1.Session_STATE_FAILED {
			e.t.Fatalf("%s FAILED: %v", session, s.GetSession())
		}
		if s.GetSession().GetState() != adminv1.Session_STATE_ACTIVE || !s.GetSession().GetEnvironment().GetExecutionAdmitted() {
			return false
		}
		return a.GetState() == adminv1.Allocation_STATE_ACTIVE && a.GetCreateSettled()
	})
	return a
}

func (e *env) allocation(name string) *adminv1.Allocation {
	e.t.Helper()
	r, err := e.allocs.GetAllocation(e.ctx, &adminv1.GetAllocationRequest{Name: name})
	if err != nil {
		e.t.Fatalf("GetAllocation %s: %v", name, err)
	}
	return r.GetAllocation()
}

// deleteSessions deletes the Sessions and waits until each is DELETED.
func (e *env) deleteSessions(names ...string) {
	e.t.Helper()
	for _, name := range names {
		if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
			e.t.Fatalf("DeleteSession %s: %v", name, err)
		}
	}
	stack.WaitFor(e.t, 2*time.Minute, "the Sessions DELETED", func() bool {
		for _, name := range names {
			s, err := e.sessions.GetSession(e.ctx, &adminv1.GetSessionRequest{Name: name})
			if err != nil {
				e.t.Fatal(err)
			}
			if s.GetSession().GetState() != adminv1.Session_STATE_DELETED {
				return false
			}
		}
		return true
	})
}

// sandboxOf is the fixture's one sandbox of allocation (by its
// berth_allocation metadata); the test fails unless there is exactly one.
func (e *env) sandboxOf(allocation string) e2btest.Sandbox {
	e.t.Helper()
	id := strings.TrimPrefix(allocation, "allocations/")
	var found []e2btest.Sandbox
	for _, s := range e.fixture.Sandboxes() {
		if s.Metadata["berth_allocation"] == id {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		e.t.Fatalf("the fixture holds %d sandboxes of %s, want 1: %v", len(found), allocation, e.fixture.Sandboxes())
	}
	return found[0]
}

// runtimeProcesses waits until the process table shows sandbox sb's
// namespace with at least min processes, and returns the namespace.
func (e *env) runtimeProcesses(sb e2btest.Sandbox, min int) string {
	e.t.Helper()
	var ns string
	stack.WaitFor(e.t, 30*time.Second, "the sandbox's processes in the process table", func() bool {
		if ns == "" {
			ns = sandboxNamespace(sb.Dir)
		}
		return ns != "" && len(processesIn(ns, sb.Dir)) >= min
	})
	return ns
}

// waitNoProcesses waits until no process of the OS process table is in
// namespace ns or names dir.
func (e *env) waitNoProcesses(ns, dir string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := processesIn(ns, dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("processes of the deleted sandbox are left in the process table: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runtimeLogs is everything every Runtime wrote.
func (e *env) runtimeLogs() string {
	files, _ := filepath.Glob(filepath.Join(e.logDir, "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.WriteString("== " + filepath.Base(f) + "\n")
		b.Write(data)
	}
	return b.String()
}

// runtimeLog is what the Runtime of sandbox sb wrote.
func (e *env) runtimeLog(sb e2btest.Sandbox) string {
	data, _ := os.ReadFile(filepath.Join(e.logDir, filepath.Base(sb.Dir)+".log"))
	return string(data)
}

// checkNoKey fails the test if the E2B API key is in Core's log, a
// Runtime's log, anything berthctl printed, or any argv the fixture ran
// (as the adapter named it and as it ran locally). It first requires
// that each log holds something, so an empty capture cannot pass.
func (e *env) checkNoKey(runtimes int) {
	e.t.Helper()
	key := e.fixture.Key
	e.mu.Lock()
	cores := append([]string{e.core.Logs()}, e.coreLogs...)
	e.mu.Unlock()
	for _, core := range cores {
		if !strings.Contains(core, `"serving"`) {
			e.t.Fatal("no Core log was captured")
		}
		if strings.Contains(core, key) {
			e.t.Error("Core's log carries the E2B API key")
		}
	}
	files, _ := filepath.Glob(filepath.Join(e.logDir, "*.log"))
	if len(files) < runtimes {
		e.t.Fatalf("%d Runtime logs captured, want %d", len(files), runtimes)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			e.t.Fatal(err)
		}
		if !bytes.Contains(data, []byte("validated the bootstrap file")) {
			e.t.Errorf("the Runtime log %s lacks its first line:\n%s", filepath.Base(f), data)
		}
		if bytes.Contains(data, []byte(key)) {
			e.t.Errorf("the Runtime log %s carries the E2B API key", filepath.Base(f))
		}
	}
	e.mu.Lock()
	outs := strings.Join(e.ctlOut, "\n")
	e.mu.Unlock()
	if outs == "" {
		e.t.Fatal("no berthctl output was captured")
	}
	if strings.Contains(outs, key) {
		e.t.Error("berthctl printed the E2B API key")
	}
	argv := e.fixture.Argv()
	if len(argv) == 0 {
		e.t.Fatal("the fixture ran no process")
	}
	for _, a := range argv {
		if strings.Contains(strings.Join(a, "\x00"), key) {
			e.t.Errorf("an argv the fixture ran carries the E2B API key: %q", a[0])
		}
	}
}
