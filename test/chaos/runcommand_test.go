package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// TestAgentKilledDuringRunCommand SIGKILLs a node agent while a command
// runs in a sandbox through it (Core's node proxy, the node protocol, the
// Docker adapter, the real engine). The interrupted call never reports
// success (partial output is not completion); the sandbox outlives the
// agent; after the restart the same sandbox runs commands again, nothing
// is replayed, and Kill leaves nothing behind (I2). Recovery is from the
// restart to the next command's result.
func TestAgentKilledDuringRunCommand(t *testing.T) {
	scenario(t, "agent SIGKILL during RunCommand", func(t *testing.T, r *run) {
		host := testenv.DockerHost(t)
		inst := stack.NewInstallation(t)
		n := stack.StartNode(t, inst, stack.NodeOptions{Socket: strings.TrimPrefix(host, "unix://"), Image: testenv.RuntimeImage(t)})
		cli, err := docker.NewClient(host)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		_, proxy := n.Connect(t, n.Dial(t), 1)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ref := contracttest.NewReference()
		info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources))
		if err != nil || !info.IsSettledRunning(ref) {
			t.Fatalf("Create: %+v, %v", info, err)
		}
		r.ops.Add(1)

		// A marker file written by the command shows whether it ran
		// more than once.
		cmd := sandbox.Command{Args: []string{"sh", "-c", "echo run >> /workspace/runs; echo started; sleep 3; echo finished"}}
		hold := time.Duration(300+r.rng.IntN(1500)) * time.Millisecond
		killed := make(chan struct{})
		go func() {
			defer close(killed)
			time.Sleep(hold)
			r.fault(t, "SIGKILL node agent %v into RunCommand", hold)
			n.Kill()
		}()
		res, err := proxy.RunCommand(ctx, ref, cmd)
		r.ops.Add(1)
		if err == nil {
			t.Errorf("I4: an interrupted command reported success: exit %d, stdout %q", res.ExitCode, res.Stdout)
			r.violations.Add(1)
		} else if !errdefs.IsCommandUnconfirmed(err) {
			// The command was sent and may have run: only "unconfirmed"
			// tells the caller the truth.
			t.Errorf("I4: an interrupted command answered %v, want command outcome unconfirmed", err)
			r.violations.Add(1)
		}
		<-killed // Kill reads the agent's process; Start replaces it
		restart := time.Now()
		n.Start()
		_, proxy = n.Connect(t, n.Dial(t), 1)
		got, err := proxy.GetInfo(ctx, ref)
		if err != nil || !got.IsSettledRunning(ref) {
			t.Fatalf("the sandbox did not outlive its node agent: %+v, %v", got, err)
		}
		res, err = proxy.RunCommand(ctx, ref, sandbox.Command{Args: []string{"cat", "/workspace/runs"}})
		if err != nil {
			t.Fatalf("RunCommand after the restart: %v", err)
		}
		r.recovery = time.Since(restart)
		r.ops.Add(2)
		if string(res.Stdout) != "run\n" {
			t.Errorf("I1: the interrupted command ran %d times (%q)", strings.Count(string(res.Stdout), "run"), res.Stdout)
			r.violations.Add(1)
		}
		if err := proxy.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		if c, v := stack.Owned(t, cli, inst.ID); c+v > 0 {
			t.Errorf("I2: %d containers and %d volumes left", c, v)
			r.violations.Add(1)
		}
	})
}
