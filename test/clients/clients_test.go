package clients

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

// createdName finds the Session an example loop says it created.
var createdName = regexp.MustCompile(`agent[-_]loop: created (sessions/\S+)`)

// exampleTimeout bounds one run of an example loop: a Session's creation,
// one short Turn and its deletion.
const exampleTimeout = 3 * time.Minute

// TestExampleAgentLoops runs each client's example loop once against one
// cluster, with a Turn whose stdout, stderr and exit status are its own
// (a marker unique to the run, so output from anything else cannot pass).
func TestExampleAgentLoops(t *testing.T) {
	root := stack.RepoRoot()
	provision := exec.Command(filepath.Join(root, "scripts", "gen-clients"), "--provision-only")
	provision.Dir = root
	if out, err := provision.CombinedOutput(); err != nil {
		t.Fatalf("scripts/gen-clients --provision-only: %v\n%s", err, out)
	}
	engine, err := docker.NewClient(testenv.DockerHost(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	opts, _ := stack.RuntimeGateway(t, engine)
	c := stack.OneNodeCluster(t, stack.DefaultSpecification(), opts, stack.NodeOptions{Network: "bridge"})
	env := append(os.Environ(),
		"BERTH_ADMIN_ADDRESS="+c.Core.AdminAddr(),
		"BERTH_ADMIN_TOKEN_FILE="+filepath.Join(c.Core.StateDir, "admin-token"),
		"BERTH_ADMIN_TOKEN=")

	t.Run("python", func(t *testing.T) {
		marker := uuid.NewString()
		cmd := exec.Command("/usr/bin/python3", "-B", "examples/agent_loop.py", "--display-name", "python-example",
			"--shell", "echo out-"+marker+"; echo err-"+marker+" >&2; exit 3")
		cmd.Dir = filepath.Join(root, "clients", "python")
		runExample(t, c, cmd, env, marker, "python-example")
	})
	t.Run("typescript", func(t *testing.T) {
		// The compiled example sits beside a link to the checkout's
		// node_modules, so Node resolves its packages from there.
		ts := filepath.Join(root, "clients", "typescript")
		out := t.TempDir()
		if err := os.Symlink(filepath.Join(ts, "node_modules"), filepath.Join(out, "node_modules")); err != nil {
			t.Fatal(err)
		}
		tsc := exec.Command(filepath.Join(ts, "node_modules", ".bin", "tsc"), "-p", ts, "--noEmit", "false", "--outDir", filepath.Join(out, "dist"))
		if b, err := tsc.CombinedOutput(); err != nil {
			t.Fatalf("tsc: %v\n%s", err, b)
		}
		if err := os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type": "module"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		marker := uuid.NewString()
		cmd := exec.Command("node", filepath.Join(out, "dist", "examples", "agent-loop.js"), "--display-name", "typescript-example",
			"--", "sh", "-c", "echo out-"+marker+"; echo err-"+marker+" >&2; exit 3")
		cmd.Dir = out
		runExample(t, c, cmd, env, marker, "typescript-example")
	})

	if containers, volumes := stack.Owned(t, c.Engine, c.Installation); containers+volumes > 0 {
		t.Errorf("after both loops the engine holds %d containers and %d volumes of the installation", containers, volumes)
	}
}

// runExample runs cmd (an example loop whose Turn prints out-<marker> and
// err-<marker> and exits 3) and checks its output and status, then the
// Session it made (named display) and its Turn through the admin API.
func runExample(t *testing.T, c *stack.Cluster, cmd *exec.Cmd, env []string, marker, display string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.Ctx, exampleTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the loop ran past %v: stdout %q, stderr %q", exampleTimeout, stdout.String(), stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3; stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	if got, want := stdout.String(), "out-"+marker+"\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if !strings.Contains(stderr.String(), "err-"+marker+"\n") {
		t.Errorf("stderr %q holds no err-%s line", stderr.String(), marker)
	}

	// The world: the Session the loop says it created is DELETED, and its
	// one Turn completed with status 3.
	m := createdName.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("stderr %q names no created Session", stderr.String())
	}
	got, err := adminv1.NewSessionServiceClient(c.CC).GetSession(c.Ctx, &adminv1.GetSessionRequest{Name: m[1]})
	if err != nil {
		t.Fatal(err)
	}
	session := got.GetSession()
	if session.GetState() != adminv1.Session_STATE_DELETED || session.GetDisplayName() != display {
		t.Errorf("%s is %v named %q after the loop, want DELETED named %q", session.GetName(), session.GetState(), session.GetDisplayName(), display)
	}
	turns, err := adminv1.NewTurnServiceClient(c.CC).ListTurns(c.Ctx, &adminv1.ListTurnsRequest{Parent: session.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if len(turns.GetTurns()) != 1 {
		t.Fatalf("%d Turns of %s, want 1", len(turns.GetTurns()), session.GetName())
	}
	turn := turns.GetTurns()[0]
	if turn.GetState() != adminv1.Turn_STATE_COMPLETED || turn.GetExitCode() != 3 {
		t.Errorf("Turn %s: %v exit %d, want COMPLETED with 3", turn.GetName(), turn.GetState(), turn.GetExitCode())
	}
}
