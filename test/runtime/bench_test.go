package runtime

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// BenchmarkRuntime measures, interleaved with their engine baselines in
// the same run (BERTH_BENCH_SAMPLES samples each, default 10), and reports
// medians and ratios:
//
//   - Session create to Runtime connected (CreateSession until
//     execution_admitted) vs `docker run --rm <image> true` of the same
//     image (the engine alone starting a container and running a process);
//   - a Turn round trip for `true` (SubmitTurn until its output stream
//     ends, then GetTurn) vs `docker exec <container> true` in the
//     Session's own container.
func BenchmarkRuntime(b *testing.B) {
	samples := 10
	if v, err := strconv.Atoi(os.Getenv("BERTH_BENCH_SAMPLES")); err == nil && v > 0 {
		samples = v
	}
	dockerCLI, err := exec.LookPath("docker")
	if err != nil {
		b.Fatal("the baseline needs the docker CLI on PATH")
	}
	e := newEnv(b)
	image, host := testenv.RuntimeImage(b), testenv.DockerHost(b)

	var connect, dockerRun []time.Duration
	var sessions, allocations []string
	for range min(samples, 4) { // max_active 4
		start := time.Now()
		resp, err := e.sessions.CreateSession(e.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
		if err != nil {
			b.Fatal(err)
		}
		name := resp.GetSession().GetName()
		for {
			g, err := e.sessions.GetSession(e.ctx, &adminv1.GetSessionRequest{Name: name})
			if err != nil {
				b.Fatal(err)
			}
			if g.GetSession().GetEnvironment().GetExecutionAdmitted() {
				break
			}
			if time.Since(start) > 2*time.Minute {
				b.Fatal("runtime did not connect")
			}
			time.Sleep(10 * time.Millisecond)
		}
		connect = append(connect, time.Since(start))
		sessions = append(sessions, name)
		allocations = append(allocations, resp.GetSession().GetAllocation())

		start = time.Now()
		if out, err := exec.Command(dockerCLI, "-H", host, "run", "--rm", "--network", "bridge", "-u", docker.RuntimeUser, image, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		dockerRun = append(dockerRun, time.Since(start))
	}

	// The first Session's own container, for the exec baseline.
	session := sessions[0]
	allocation := strings.TrimPrefix(allocations[0], "allocations/")
	cs, err := e.docker.ContainerList(context.Background(), client.ContainerListOptions{
		Filters: client.Filters{}.Add("label", docker.LabelAllocation+"="+allocation),
	})
	if err != nil || len(cs.Items) != 1 {
		b.Fatalf("the Session's container: %d found, %v", len(cs.Items), err)
	}
	container := cs.Items[0].ID
	var turn, dockerExec []time.Duration
	for range samples {
		start := time.Now()
		r := e.run(session, &adminv1.Turn{Command: &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: []string{"true"}}}}})
		if r.turn.GetState() != adminv1.Turn_STATE_COMPLETED {
			b.Fatalf("turn: %v", r)
		}
		turn = append(turn, time.Since(start))
		start = time.Now()
		if out, err := exec.Command(dockerCLI, "-H", host, "exec", "-u", docker.RuntimeUser, container, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v: %s", err, out)
		}
		dockerExec = append(dockerExec, time.Since(start))
	}
	mc, mr, mt, me := stack.Median(connect), stack.Median(dockerRun), stack.Median(turn), stack.Median(dockerExec)
	b.ReportMetric(stack.Millis(mc), "session-connected-ms")
	b.ReportMetric(stack.Millis(mr), "docker-run-ms")
	b.ReportMetric(float64(mc)/float64(mr), "connected/docker-run")
	b.ReportMetric(stack.Millis(mt), "turn-true-ms")
	b.ReportMetric(stack.Millis(me), "docker-exec-ms")
	b.ReportMetric(float64(mt)/float64(me), "turn/docker-exec")
	b.Logf("Session create to Runtime connected: median %v over %d vs docker run --rm true %v: ratio %.2f", mc, len(connect), mr, float64(mc)/float64(mr))
	b.Logf("Turn round trip (true): median %v over %d vs docker exec true %v: ratio %.2f", mt, len(turn), me, float64(mt)/float64(me))
}
