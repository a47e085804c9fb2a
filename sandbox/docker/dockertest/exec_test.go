package dockertest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"berth.dev/sandbox/docker/dockertest"
)

// execResult is what one exec produced.
type execResult struct {
	stdout, stderr string
	// order is the output in arrival order, each piece tagged "o:" or "e:".
	order    []string
	exitCode int
	running  bool
}

type tagWriter struct {
	mu    *sync.Mutex
	tag   string
	buf   *bytes.Buffer
	order *[]string
}

func (w tagWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*w.order = append(*w.order, w.tag+string(p))
	return w.buf.Write(p)
}

// runExec runs cmd in the container the way an adapter does: create,
// attach (hijacked), write stdin, close the write side, demultiplex,
// inspect.
func runExec(t *testing.T, ctx context.Context, c *client.Client, ctr string, cmd []string, stdin *string) execResult {
	t.Helper()
	created, err := c.ExecCreate(ctx, ctr, client.ExecCreateOptions{
		Cmd: cmd, AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true, User: "berth", WorkingDir: "/work",
	})
	if err != nil {
		t.Fatalf("exec create: %v", err)
	}
	att, err := c.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec attach: %v", err)
	}
	defer att.Close()
	if mt, ok := att.MediaType(); !ok || mt != dockertest.MediaTypeMultiplexed {
		t.Errorf("media type = %q, %v", mt, ok)
	}
	if stdin != nil {
		go func() {
			_, _ = io.WriteString(att.Conn, *stdin)
			_ = att.CloseWrite()
		}()
	}
	var (
		mu             sync.Mutex
		stdout, stderr bytes.Buffer
		res            execResult
	)
	if _, err := stdcopy.StdCopy(tagWriter{&mu, "o:", &stdout, &res.order}, tagWriter{&mu, "e:", &stderr, &res.order}, att.Reader); err != nil {
		t.Fatalf("demultiplex: %v", err)
	}
	ins, err := c.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		t.Fatalf("exec inspect: %v", err)
	}
	res.stdout, res.stderr, res.exitCode, res.running = stdout.String(), stderr.String(), ins.ExitCode, ins.Running
	return res
}

func runningContainer(t *testing.T, s *dockertest.Server, c *client.Client, ctx context.Context, name string) {
	t.Helper()
	s.PutImage(testImage)
	if _, err := c.ContainerCreate(ctx, createOptions(name)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	s.ResetCalls()
}

func ptr[T any](v T) *T { return &v }

func TestExec(t *testing.T) {
	s, c, ctx := setup(t)
	runningContainer(t, s, c, ctx, "berth-x")

	big := 200_000
	cases := []struct {
		name           string
		cmd            []string
		stdin          *string
		stdout, stderr string
		code           int
	}{
		{"echo", []string{"echo", "hello", "world"}, nil, "hello world\n", "", 0},
		{"cat", []string{"cat"}, ptr("line one\nline two\n"), "line one\nline two\n", "", 0},
		{"cat empty stdin", []string{"cat"}, ptr(""), "", "", 0},
		{"echo with stdin attached", []string{"echo", "hi"}, ptr("ignored"), "hi\n", "", 0},
		{"fail", []string{"fail", "3", "it", "broke"}, nil, "", "it broke", 3},
		{"big", []string{"big", "200000"}, nil, strings.Repeat("x", big), "", 0},
		{"not found", []string{"nope", "x"}, nil, "", "nope: not found", 127},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := runExec(t, ctx, c, "berth-x", tc.cmd, tc.stdin)
			if res.stdout != tc.stdout || res.stderr != tc.stderr || res.exitCode != tc.code || res.running {
				t.Errorf("got stdout %d bytes %.40q, stderr %q, exit %d, running %v; want %.40q, %q, %d",
					len(res.stdout), res.stdout, res.stderr, res.exitCode, res.running, tc.stdout, tc.stderr, tc.code)
			}
		})
	}

	t.Run("interleave keeps order", func(t *testing.T) {
		res := runExec(t, ctx, c, "berth-x", []string{"interleave"}, nil)
		if got := strings.Join(res.order, ","); got != "o:o1,e:e1,o:o2" {
			t.Errorf("order = %s", got)
		}
	})

	t.Run("calls and state", func(t *testing.T) {
		s.ResetCalls()
		runExec(t, ctx, c, "berth-x", []string{"cat"}, ptr("abc"))
		wantCalls(t, s, dockertest.CallExecCreate, dockertest.CallExecStart, dockertest.CallExecInspect)
		var found bool
		for _, e := range s.Execs() {
			if string(e.Stdin) == "abc" {
				found = true
				if e.User != "berth" || e.WorkingDir != "/work" || !e.AttachStdin || e.Running || !e.Started {
					t.Errorf("exec = %+v", e)
				}
			}
		}
		if !found {
			t.Error("the exec is not in Execs")
		}
	})

	t.Run("errors", func(t *testing.T) {
		if _, err := c.ExecCreate(ctx, "absent", client.ExecCreateOptions{Cmd: []string{"echo"}}); !cerrdefs.IsNotFound(err) {
			t.Errorf("exec in an absent container: %v, want not found", err)
		}
		s.PutContainer("berth-stopped", nil, dockertest.StateExited)
		if _, err := c.ExecCreate(ctx, "berth-stopped", client.ExecCreateOptions{Cmd: []string{"echo"}}); !cerrdefs.IsConflict(err) {
			t.Errorf("exec in a stopped container: %v, want conflict", err)
		}
		if _, err := c.ExecInspect(ctx, "absent", client.ExecInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("inspect of an absent exec: %v, want not found", err)
		}
		// A start error comes before the upgrade; the client reports the
		// status only.
		if _, err := c.ExecAttach(ctx, "absent", client.ExecAttachOptions{}); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("attach to an absent exec: %v", err)
		}
	})

	t.Run("inspect lag", func(t *testing.T) {
		s.SetExecInspectLag(2)
		defer s.SetExecInspectLag(0)
		created, err := c.ExecCreate(ctx, "berth-x", client.ExecCreateOptions{Cmd: []string{"fail", "4"}, AttachStdout: true})
		if err != nil {
			t.Fatal(err)
		}
		att, err := c.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(att.Reader)
		att.Close()
		var got []string
		for range 3 {
			ins, err := c.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%v/%d", ins.Running, ins.ExitCode))
		}
		if strings.Join(got, ",") != "true/0,true/0,false/4" {
			t.Errorf("inspections = %q", got)
		}
	})

	t.Run("tty is raw", func(t *testing.T) {
		created, err := c.ExecCreate(ctx, "berth-x", client.ExecCreateOptions{Cmd: []string{"interleave"}, TTY: true, AttachStdout: true, AttachStderr: true})
		if err != nil {
			t.Fatal(err)
		}
		att, err := c.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: true})
		if err != nil {
			t.Fatal(err)
		}
		defer att.Close()
		out, _ := io.ReadAll(att.Reader)
		if mt, _ := att.MediaType(); mt != dockertest.MediaTypeRaw || string(out) != "o1e1o2" {
			t.Errorf("tty exec: %q %q", mt, out)
		}
	})
}
