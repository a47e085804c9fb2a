package clients

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
// an upload, one short Turn, a download and the Session's deletion.
const exampleTimeout = 3 * time.Minute

// turnScript is the Turn every loop runs, over the input.txt the loop
// uploaded: it prints the input, writes its byte count and a marker line
// to result.txt (which the loop downloads and prints after the Turn's
// output), prints a marker on stderr and exits 3. Its %[1]s is the run's
// marker.
const turnScript = `cat input.txt; echo err-%[1]s >&2; wc -c < input.txt > result.txt; echo result-%[1]s >> result.txt; exit 3`

// TestExampleAgentLoops runs each client's example loop once against one
// cluster, with an input file and a Turn whose stdout, stderr, result
// file and exit status are its own (a marker unique to the run, so output
// from anything else cannot pass).
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
			"--input", "in-"+marker+"\n", "--shell", fmt.Sprintf(turnScript, marker))
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
			"--input", "in-"+marker+"\n", "--", "sh", "-c", fmt.Sprintf(turnScript, marker))
		cmd.Dir = out
		runExample(t, c, cmd, env, marker, "typescript-example")
	})
	t.Run("go", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "agentloop")
		build := exec.Command("go", "build", "-o", bin, "./clients/agentloop")
		build.Dir = filepath.Join(root, "test")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		marker := uuid.NewString()
		cmd := exec.Command(bin, "--display-name", "go-example",
			"--input", "in-"+marker+"\n", "--", "sh", "-c", fmt.Sprintf(turnScript, marker))
		cmd.Dir = t.TempDir()
		runExample(t, c, cmd, env, marker, "go-example")
	})

	if containers, volumes := stack.Owned(t, c.Engine, c.Installation); containers+volumes > 0 {
		t.Errorf("after the loops the engine holds %d containers and %d volumes of the installation", containers, volumes)
	}
}

// runExample runs cmd (an example loop that uploads in-<marker> as
// input.txt and runs turnScript) and checks its output and status, then
// the Session it made (named display) and its Turn through the admin API.
// Its stdout must be the Turn's (the uploaded input, read back in the
// Session) followed by the downloaded result.txt: the input's byte count,
// computed in the Session, and the result marker.
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
	input := "in-" + marker + "\n"
	result := fmt.Sprintf("%d\nresult-%s\n", len(input), marker)
	if got, want := stdout.String(), input+result; got != want {
		t.Errorf("stdout %q, want %q (the Turn's output, then result.txt)", got, want)
	}
	for _, line := range []string{
		"err-" + marker + "\n",
		fmt.Sprintf("uploaded input.txt (%d bytes)\n", len(input)),
		fmt.Sprintf("downloaded result.txt (%d bytes)\n", len(result)),
		"into 2 branches\n",
		// Each branch read the result.txt it was forked with and wrote
		// its own file, downloaded from it.
		fmt.Sprintf("branch 0: branch-0 %d\n", len(result)),
		fmt.Sprintf("branch 1: branch-1 %d\n", len(result)),
	} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("stderr %q holds no %q line", stderr.String(), line)
		}
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
	// Its two branches (the fork's children, named after the loop's
	// Session) are DELETED too.
	list, err := adminv1.NewSessionServiceClient(c.CC).ListSessions(c.Ctx, &adminv1.ListSessionsRequest{ShowDeleted: true, PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	branches := 0
	for _, s := range list.GetSessions() {
		if s.GetDisplayName() == display+"-branch-0" || s.GetDisplayName() == display+"-branch-1" {
			branches++
			if s.GetState() != adminv1.Session_STATE_DELETED {
				t.Errorf("branch %s (%s) is %v after the loop, want DELETED", s.GetName(), s.GetDisplayName(), s.GetState())
			}
		}
	}
	if branches != 2 {
		t.Errorf("%d branch Sessions of %s, want 2", branches, display)
	}
}
