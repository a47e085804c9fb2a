package docker_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
)

// BenchmarkCreateToRunning compares Create through the adapter (volumes,
// container, verification, bootstrap copy, start) with `docker run -d` of
// the same image with the same options, both to a started container. The
// two are interleaved, BERTH_BENCH_SAMPLES times each (default 10), and the
// benchmark reports both medians and their ratio. Run it with `make bench`.
func BenchmarkCreateToRunning(b *testing.B) {
	samples := 10
	if v, err := strconv.Atoi(os.Getenv("BERTH_BENCH_SAMPLES")); err == nil && v > 0 {
		samples = v
	}
	cliPath, err := exec.LookPath("docker")
	if err != nil {
		b.Fatal("the baseline needs the docker CLI on PATH")
	}
	e := newBenchEngine(b)
	ctx := context.Background()
	var adapter, baseline []time.Duration
	for i := 0; i < samples; i++ {
		ref := contracttest.NewReference()
		req := contracttest.CreateRequest(ref, resources)
		start := time.Now()
		if _, err := e.p.Create(ctx, req); err != nil {
			b.Fatalf("Create: %v", err)
		}
		adapter = append(adapter, time.Since(start))
		if err := e.p.Kill(ctx, ref); err != nil {
			b.Fatalf("Kill: %v", err)
		}

		name := "berth-bench-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
		args := append([]string{"-H", e.host, "run", "-d", "--name", name}, dockerRunFlags(e, name)...)
		args = append(args, e.image)
		args = append(args, docker.RuntimeCommand()...)
		start = time.Now()
		if out, err := exec.Command(cliPath, args...).CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		baseline = append(baseline, time.Since(start))
		_, _ = e.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true})
		for _, v := range []string{name + "-home", name + "-environment"} {
			_, _ = e.cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{Force: true})
		}
	}
	ma, mb := median(adapter), median(baseline)
	b.ReportMetric(float64(ma.Microseconds())/1000, "adapter-ms")
	b.ReportMetric(float64(mb.Microseconds())/1000, "docker-run-ms")
	b.ReportMetric(float64(ma)/float64(mb), "ratio")
	b.Logf("create-to-running over %d samples each: adapter median %v, docker run median %v, ratio %.2f", samples, ma, mb, float64(ma)/float64(mb))
}

// dockerRunFlags are the adapter's container settings as docker run flags.
func dockerRunFlags(e *benchEngine, name string) []string {
	return []string{
		"--user", docker.RuntimeUser, "--read-only", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges:true",
		"--security-opt", "seccomp=" + e.seccompPath,
		"--security-opt", "apparmor=unconfined",
		"--network", "none",
		"--cpus", strconv.FormatFloat(float64(resources.CPUMillis)/1000, 'f', 3, 64),
		"--memory", strconv.FormatInt(resources.MemoryBytes, 10),
		"--memory-swap", strconv.FormatInt(resources.MemoryBytes, 10),
		"--pids-limit", strconv.Itoa(docker.PidsLimit),
		"--tmpfs", "/tmp:" + docker.TmpfsOptions,
		"--mount", "type=volume,src=" + name + "-home,dst=/home",
		"--mount", "type=volume,src=" + name + "-environment,dst=/environment",
		"--mount", "type=volume,src=" + name + "-environment,dst=/workspace,volume-subpath=workspace",
		"--label", "io.berth.bench=1",
	}
}

type benchEngine struct {
	*engine
	host        string
	seccompPath string
}

func newBenchEngine(b *testing.B) *benchEngine {
	e := newEngine(b, false)
	return &benchEngine{engine: e, host: e.host, seccompPath: seccompProfilePath()}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
