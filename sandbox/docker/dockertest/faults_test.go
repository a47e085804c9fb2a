package dockertest_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"berth.dev/sandbox/docker/dockertest"
)

func TestFaultDrop(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutImage(testImage)
	s.Arm(dockertest.CallContainerCreate, dockertest.FaultDrop, nil)
	_, err := c.ContainerCreate(ctx, createOptions("berth-d"))
	if err == nil {
		t.Fatal("a dropped create succeeded")
	}
	if cerrdefs.IsNotFound(err) || cerrdefs.IsInternal(err) || cerrdefs.IsConflict(err) || errors.Is(err, context.Canceled) {
		t.Errorf("a drop surfaced as an engine answer: %v", err)
	}
	if _, ok := s.Container("berth-d"); ok {
		t.Error("a dropped create was performed")
	}
	// The fault is one-shot.
	if _, err := c.ContainerCreate(ctx, createOptions("berth-d")); err != nil {
		t.Errorf("create after the drop: %v", err)
	}
	wantCalls(t, s, dockertest.CallContainerCreate, dockertest.CallContainerCreate)
}

func TestFaultServerError(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutVolume("berth-v", nil)
	s.Arm(dockertest.CallVolumeRemove, dockertest.FaultServerError, nil)
	_, err := c.VolumeRemove(ctx, "berth-v", client.VolumeRemoveOptions{})
	if !cerrdefs.IsInternal(err) {
		t.Fatalf("a 500 remove: %v, want internal", err)
	}
	// The client passes the engine's message through: an adapter must not.
	if !strings.Contains(err.Error(), dockertest.SensitiveToken) {
		t.Errorf("error %q lacks the engine message", err)
	}
	if _, ok := s.Volume("berth-v"); !ok {
		t.Error("a refused remove was performed")
	}
	if !containsAll(s.Sensitive(), dockertest.SensitiveToken, s.Addr(), dockertest.EngineID) {
		t.Errorf("Sensitive() = %q", s.Sensitive())
	}
	wantCalls(t, s, dockertest.CallVolumeRemove)
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, l := range list {
			found = found || l == w
		}
		if !found {
			return false
		}
	}
	return true
}

func TestFaultCancelAfterDispatch(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutImage(testImage)
	if _, err := c.ContainerCreate(ctx, createOptions("berth-k")); err != nil {
		t.Fatal(err)
	}
	s.ResetCalls()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.Arm(dockertest.CallContainerStart, dockertest.FaultCancelAfterDispatch, cancel)
	_, err := c.ContainerStart(cctx, "berth-k", client.ContainerStartOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("start = %v, want context.Canceled", err)
	}
	if got, _ := s.Container("berth-k"); got.State != dockertest.StateRunning {
		t.Errorf("a dispatched start was not performed: %+v", got.State)
	}

	vctx, vcancel := context.WithCancel(ctx)
	defer vcancel()
	s.Arm(dockertest.CallVolumeCreate, dockertest.FaultCancelAfterDispatch, vcancel)
	if _, err := c.VolumeCreate(vctx, client.VolumeCreateOptions{Name: "berth-kv"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("volume create = %v, want context.Canceled", err)
	}
	if _, ok := s.Volume("berth-kv"); !ok {
		t.Error("a dispatched volume create was not performed")
	}
	wantCalls(t, s, dockertest.CallContainerStart, dockertest.CallVolumeCreate)
}

func TestPingFaultsAreAbsorbedByTheClient(t *testing.T) {
	for _, f := range []dockertest.Fault{dockertest.FaultDrop, dockertest.FaultServerError} {
		t.Run(f.String(), func(t *testing.T) {
			s := dockertest.Start(t)
			c := newClient(t, s)
			s.Arm(dockertest.CallPing, f, nil)
			if _, err := c.Info(testContext(t), client.InfoOptions{}); err != nil {
				t.Fatalf("info: %v", err)
			}
			// A failed HEAD /_ping falls back to GET /_ping.
			calls := s.Calls()
			if len(calls) != 3 || calls[0].Method != "HEAD" || calls[1].Method != "GET" || calls[1].Name != dockertest.CallPing ||
				calls[2].Name != dockertest.CallInfo || calls[2].Version != dockertest.APIVersion {
				t.Errorf("calls = %+v", calls)
			}
		})
	}
}

func TestExecStartFaults(t *testing.T) {
	s, c, ctx := setup(t)
	runningContainer(t, s, c, ctx, "berth-e")
	newExec := func(stdin bool) string {
		t.Helper()
		created, err := c.ExecCreate(ctx, "berth-e", client.ExecCreateOptions{Cmd: []string{"fail", "5", "x"}, AttachStdin: stdin, AttachStdout: true, AttachStderr: true})
		if err != nil {
			t.Fatal(err)
		}
		return created.ID
	}
	// attachHeld attaches to a new exec whose start is armed to be held
	// after dispatch; the fixture cancels the context it returns.
	attachHeld := func(t *testing.T, stdin bool) (string, context.Context, client.ExecAttachResult, error) {
		t.Helper()
		id := newExec(stdin)
		cctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		s.Arm(dockertest.CallExecStart, dockertest.FaultCancelAfterDispatch, cancel)
		att, err := c.ExecAttach(cctx, id, client.ExecAttachOptions{})
		return id, cctx, att, err
	}

	t.Run("drop before the upgrade", func(t *testing.T) {
		id := newExec(false)
		s.Arm(dockertest.CallExecStart, dockertest.FaultDrop, nil)
		if _, err := c.ExecAttach(ctx, id, client.ExecAttachOptions{}); err == nil {
			t.Fatal("a dropped exec start succeeded")
		}
		if e, _ := s.Exec(id); e.Started {
			t.Errorf("a dropped exec start was performed: %+v", e)
		}
	})

	t.Run("server error before the upgrade", func(t *testing.T) {
		id := newExec(false)
		s.Arm(dockertest.CallExecStart, dockertest.FaultServerError, nil)
		_, err := c.ExecAttach(ctx, id, client.ExecAttachOptions{})
		if err == nil || !strings.Contains(err.Error(), "500") {
			t.Fatalf("a 500 exec start: %v", err)
		}
		if e, _ := s.Exec(id); e.Started {
			t.Errorf("a refused exec start was performed: %+v", e)
		}
	})

	t.Run("cancel after dispatch holds the stream", func(t *testing.T) {
		id, cctx, att, err := attachHeld(t, false)
		if err != nil {
			// Cancellation may win the race with the end of the handshake.
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("attach = %v", err)
			}
		} else {
			defer att.Close()
			<-cctx.Done()
			// The client does not tie the hijacked connection to the
			// context: the stream stays open and silent until the caller
			// closes it.
			wantSilent(t, att)
		}
		if !errors.Is(cctx.Err(), context.Canceled) {
			t.Errorf("context = %v, want cancelled", cctx.Err())
		}
		e, _ := s.Exec(id)
		if !e.Started || e.Running || e.ExitCode != 5 {
			t.Errorf("a dispatched exec start was not performed: %+v", e)
		}
	})

	t.Run("cancel after dispatch with stdin", func(t *testing.T) {
		id, cctx, att, err := attachHeld(t, true)
		if err != nil {
			t.Fatalf("attach = %v", err)
		}
		defer att.Close()
		_, _ = att.Conn.Write([]byte("input"))
		_ = att.CloseWrite()
		// The fixture cancels once stdin has ended.
		<-cctx.Done()
		if e, _ := s.Exec(id); !e.Started || e.Running || e.ExitCode != 5 || string(e.Stdin) != "input" {
			t.Errorf("a dispatched exec start was not performed: %+v", e)
		}
		wantSilent(t, att)
	})

	wantCalls(t, s,
		dockertest.CallExecCreate, dockertest.CallExecStart,
		dockertest.CallExecCreate, dockertest.CallExecStart,
		dockertest.CallExecCreate, dockertest.CallExecStart,
		dockertest.CallExecCreate, dockertest.CallExecStart)
}

// wantSilent checks that a held exec stream stays open and answers
// nothing: a short read times out.
func wantSilent(t *testing.T, att client.ExecAttachResult) {
	t.Helper()
	_ = att.Conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	n, rerr := att.Reader.Read(make([]byte, 1))
	var ne net.Error
	if n != 0 || !errors.As(rerr, &ne) || !ne.Timeout() {
		t.Errorf("read from a held stream = %d, %v; want a timeout", n, rerr)
	}
}

func TestCloseReleasesHeldCalls(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutVolume("berth-h", nil)
	s.Arm(dockertest.CallVolumeInspect, dockertest.FaultCancelAfterDispatch, func() {})
	done := make(chan error, 1)
	go func() {
		_, err := c.VolumeInspect(ctx, "berth-h", client.VolumeInspectOptions{})
		done <- err
	}()
	for len(s.Calls()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a held call answered after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release a held call")
	}
}
