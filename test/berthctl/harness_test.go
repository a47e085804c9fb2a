package berthctl

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

	"github.com/moby/moby/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// TestMain builds berthctl beside the binaries stack.Run builds, then runs
// the tests.
func TestMain(m *testing.M) { os.Exit(stack.RunWithBerthctl(m)) }

// ctl runs berthctl as an operator whose home and config file are the
// test's own, and checks that no run shows the admin token.
type ctl struct {
	t      *testing.T
	home   string
	config string
	token  string // the admin token, which no output may show
}

func newCtl(t *testing.T, token string) *ctl {
	home := t.TempDir()
	return &ctl{t: t, home: home, config: filepath.Join(home, "berthctl.json"), token: token}
}

// result is one finished berthctl process.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("berthctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cmd prepares berthctl with args, the given extra environment, and
// stdin from /dev/null.
func (c *ctl) cmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, stack.BerthctlBin(), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.home, "BERTHCTL_CONFIG=" + c.config}, env...)
	return cmd
}

// runEnv runs berthctl to its end (at most two minutes).
func (c *ctl) runEnv(stdin []byte, env []string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.cmd(ctx, env, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		c.t.Fatalf("berthctl %v: %v", args, err)
	}
	c.noToken(r.stdout, r.stderr)
	return r
}

// noToken fails the test if any of outs shows the admin token.
func (c *ctl) noToken(outs ...string) {
	c.t.Helper()
	for _, o := range outs {
		if c.token != "" && strings.Contains(o, c.token) {
			c.t.Fatal("berthctl printed the admin token")
		}
	}
}

func (c *ctl) run(args ...string) result {
	c.t.Helper()
	return c.runEnv(nil, nil, args...)
}

// ok runs berthctl and fails the test unless it exits 0.
func (c *ctl) ok(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("%v", r)
	}
	return r
}

// json runs berthctl with -o json and decodes its output into m, the
// API's response message, strictly (an unknown field fails).
func (c *ctl) json(m proto.Message, args ...string) {
	c.t.Helper()
	r := c.ok(append(args, "-o", "json")...)
	if err := protojson.Unmarshal([]byte(r.stdout), m); err != nil {
		c.t.Fatalf("%v\nnot a %s: %v", r, m.ProtoReflect().Descriptor().FullName(), err)
	}
}

// fails runs berthctl and fails the test unless it exits code with
// stderr starting with want.
func (c *ctl) fails(code int, want string, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != code || !strings.HasPrefix(r.stderr, want) {
		c.t.Fatalf("%v\nwant exit %d and stderr starting %q", r, code, want)
	}
	return r
}

// cells splits a table line into its cells (tabwriter pads columns with
// at least two spaces).
var cellGap = regexp.MustCompile(`\s{2,}`)

func cells(line string) []string { return cellGap.Split(strings.TrimSpace(line), -1) }

// tableRow returns the cells of the table row whose first cell is key,
// after checking the header; the test fails without one.
func tableRow(t *testing.T, out string, header []string, key string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if got := cells(lines[0]); strings.Join(got, "|") != strings.Join(header, "|") {
		t.Fatalf("header %q, want %q in\n%s", got, header, out)
	}
	for _, l := range lines[1:] {
		if c := cells(l); c[0] == key {
			return c
		}
	}
	t.Fatalf("no row %s in\n%s", key, out)
	return nil
}

// value returns the value of a "KEY:  value" line of a single resource's
// table; the test fails without one.
func value(t *testing.T, out, key string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, key+":"); ok && (rest == "" || rest[0] == ' ') {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %s in\n%s", key, out)
	return ""
}

// id is the last segment of a resource name.
func id(name string) string { return name[strings.LastIndex(name, "/")+1:] }

// engineOf returns the test engine's address, the runtime image and a
// client of the engine, closed with the test.
func engineOf(t *testing.T) (host, image string, engine *client.Client) {
	t.Helper()
	host, image = testenv.DockerHost(t), testenv.RuntimeImage(t)
	engine, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	return host, image, engine
}

// startCore starts berth-core with its Runtime gateway on the engine's
// bridge, on a database of its own, and returns it with an admin
// connection, its context and the installation id. At the test's end it
// logs Core's output if the test failed and removes what the
// installation left on the engine.
func startCore(t *testing.T, engine *client.Client) (*stack.Core, *grpc.ClientConn, context.Context, string) {
	t.Helper()
	opts, _ := stack.RuntimeGateway(t, engine)
	core := stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true, opts)
	cc, ctx := core.AdminClient(t)
	installation := stack.InstallationID(t, ctx, cc)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", core.Logs())
		}
		stack.RemoveOwned(t, engine, installation)
	})
	return core, cc, ctx, installation
}
