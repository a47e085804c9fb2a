package nodeproto

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// realEngineNode starts a node agent over the real test engine.
func realEngineNode(t testing.TB) (*stack.Installation, *stack.Node, *client.Client) {
	t.Helper()
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	inst := stack.NewInstallation(t)
	n := stack.StartNode(t, inst, stack.NodeOptions{Socket: strings.TrimPrefix(host, "unix://"), Image: image})
	cli, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Nothing labelled with this installation may remain.
		if c, v := stack.RemoveOwned(t, cli, inst.ID); c+v > 0 {
			t.Errorf("left behind %d containers and %d volumes", c, v)
		}
		_ = cli.Close()
	})
	return inst, n, cli
}

// TestRoundTripOnTheRealEngine: Core's proxy -> node agent -> Docker
// adapter -> the real engine: create, commands, observe, kill.
func TestRoundTripOnTheRealEngine(t *testing.T) {
	_, n, _ := realEngineNode(t)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources))
	if err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create: %+v, %v", info, err)
	}
	res, err := proxy.RunCommand(ctx, ref, sandbox.Command{
		Args:  []string{"sh", "-c", "cat; echo; id -u; echo err >&2; exit 3"},
		Stdin: []byte("secret-stdin"),
	})
	if err != nil || string(res.Stdout) != "secret-stdin\n1000\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Fatalf("RunCommand = %q %q %d, %v", res.Stdout, res.Stderr, res.ExitCode, err)
	}
	big, err := proxy.RunCommand(ctx, ref, sandbox.Command{
		Args: []string{"sh", "-c", "dd if=/dev/zero bs=1048576 count=6 2>/dev/null"}, OutputLimit: 5 << 20,
	})
	if err != nil || len(big.Stdout) != 5<<20 || !big.StdoutTruncated {
		t.Fatalf("large output through the node: %d bytes, truncated %v, %v", len(big.Stdout), big.StdoutTruncated, err)
	}
	obs, err := proxy.Observe(ctx, ref)
	if err != nil || obs.MemoryBytes == 0 {
		t.Fatalf("Observe: %+v, %v", obs, err)
	}
	if err := proxy.Kill(ctx, ref); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, err := proxy.GetInfo(ctx, ref); err == nil {
		t.Fatal("GetInfo after Kill found the container")
	}
}

// BenchmarkRunCommand compares `true` through Core's proxy and a node agent,
// through the adapter in-process, and with `docker exec`, interleaved,
// BERTH_BENCH_SAMPLES times each (default 20), and reports medians and the
// ratios against docker exec.
func BenchmarkRunCommand(b *testing.B) {
	samples := 20
	if v, err := strconv.Atoi(benchSamples()); err == nil && v > 0 {
		samples = v
	}
	inst, n, cli := realEngineNode(b)
	_, proxy := n.Connect(b, n.Dial(b), 1)
	ctx := context.Background()
	ref := contracttest.NewReference()
	info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources))
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Kill(ctx, ref)
	direct := docker.New(cli, docker.Options{InstallationID: inst.ID, Config: docker.NodeConfig{Image: testenv.RuntimeImage(b), Network: "none"}})
	dockerCLI, err := exec.LookPath("docker")
	if err != nil {
		b.Fatal("the baseline needs the docker CLI on PATH")
	}
	cmd := sandbox.Command{Args: []string{"true"}}
	var viaNode, inProcess, dockerExec []time.Duration
	for range samples {
		start := time.Now()
		if _, err := proxy.RunCommand(ctx, ref, cmd); err != nil {
			b.Fatal(err)
		}
		viaNode = append(viaNode, time.Since(start))
		start = time.Now()
		if _, err := direct.RunCommand(ctx, ref, cmd); err != nil {
			b.Fatal(err)
		}
		inProcess = append(inProcess, time.Since(start))
		start = time.Now()
		if out, err := exec.Command(dockerCLI, "-H", testenv.DockerHost(b), "exec", "-u", docker.RuntimeUser, info.ProviderID, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v: %s", err, out)
		}
		dockerExec = append(dockerExec, time.Since(start))
	}
	mn, mi, md := stack.Median(viaNode), stack.Median(inProcess), stack.Median(dockerExec)
	b.ReportMetric(stack.Millis(mn), "node-ms")
	b.ReportMetric(stack.Millis(mi), "in-process-ms")
	b.ReportMetric(stack.Millis(md), "docker-exec-ms")
	b.ReportMetric(float64(mn)/float64(md), "node/docker-exec")
	b.ReportMetric(float64(mi)/float64(md), "in-process/docker-exec")
	b.Logf("RunCommand(true) over %d samples: via node %v, in-process %v, docker exec %v; ratios %.2f and %.2f against docker exec",
		samples, mn, mi, md, float64(mn)/float64(md), float64(mi)/float64(md))
}
