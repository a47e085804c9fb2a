package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"
	"berth.dev/test/internal/benchstat"
)

// BenchmarkForkCopy is issue 33's step K0 (docs/files-fork-plan.md §5):
// before any fork code, it measures on the real engine, with the engine
// client, how fast a Session's volume pair (home and environment, 100 MB
// of workspace) can be copied into new volumes, by three methods:
//
//   - archive: the engine's archive get and put, as Suspend copies today;
//   - helper: a container of the runtime image, created beforehand,
//     started to run busybox `cp -a` from the source volumes (mounted
//     read-only) into the target volumes, timed from its start to its exit;
//   - helper x10: one such helper copying into 10 target pairs.
//
// A capture pauses its source for the copy, so the copy's time is the
// pause window a fork's capture would cost by each method (helper: the
// container is created before the pause). Run it with `make
// bench-fork-copy`; BERTH_BENCH_SAMPLES samples (default 5).
func BenchmarkForkCopy(b *testing.B) {
	samples := benchstat.EnvInt(b, "BERTH_BENCH_SAMPLES", 5)
	cli, err := client.New(client.WithHost(testenv.DockerHost(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	image := testenv.RuntimeImage(b)
	archive := workspaceArchive(b, 100_000_000, 7)
	k := &forkCopy{t: b, cli: cli, image: image, prefix: "berth-k0-" + uuid.NewString()[:8]}
	defer k.cleanup()
	src := k.pair("src")
	k.fill(src, archive)
	var arch, one, ten []time.Duration
	for i := range samples {
		arch = append(arch, k.archiveCopy(src, k.pair(fmt.Sprintf("a%d", i))))
		one = append(one, k.helperCopy(src, []string{k.pair(fmt.Sprintf("h%d", i))}))
		var targets []string
		for j := range 10 {
			targets = append(targets, k.pair(fmt.Sprintf("t%d-%d", i, j)))
		}
		ten = append(ten, k.helperCopy(src, targets))
		k.cleanupPairs()
		k.pairs = []string{src}
	}
	ms := func(ds []time.Duration) float64 { return benchstat.Millis(benchstat.Percentile(ds, 50)) }
	fmt.Fprintf(os.Stdout, "K0: copy of a 100 MB volume pair, median of %d (ms)\n", samples)
	fmt.Fprintf(os.Stdout, "  archive get+put (Suspend today)      %8.1f\n", ms(arch))
	fmt.Fprintf(os.Stdout, "  helper cp -a, 1 target               %8.1f\n", ms(one))
	fmt.Fprintf(os.Stdout, "  helper cp -a, 10 targets             %8.1f  (%.1f per target)\n", ms(ten), ms(ten)/10)
}

// forkCopy holds K0's volumes and containers.
type forkCopy struct {
	t          testing.TB
	cli        *client.Client
	image      string
	prefix     string
	pairs      []string
	containers []string
}

// pair makes a volume pair (name-home, name-environment) and returns its
// name.
func (k *forkCopy) pair(name string) string {
	k.t.Helper()
	n := k.prefix + "-" + name
	for _, v := range []string{n + "-home", n + "-environment"} {
		if _, err := k.cli.VolumeCreate(context.Background(), client.VolumeCreateOptions{Name: v}); err != nil {
			k.t.Fatal(err)
		}
	}
	k.pairs = append(k.pairs, n)
	return n
}

// holder creates a never-started container mounting pair at the Session's
// paths.
func (k *forkCopy) holder(pair string) string {
	k.t.Helper()
	created, err := k.cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{
		Name:   pair + "-holder-" + uuid.NewString()[:4],
		Config: &container.Config{Image: k.image, Entrypoint: []string{"/never-started"}, NetworkDisabled: true},
		HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: pair + "-home", Target: docker.HomeMount},
			{Type: mount.TypeVolume, Source: pair + "-environment", Target: docker.EnvironmentPath},
		}},
	})
	if err != nil {
		k.t.Fatal(err)
	}
	k.containers = append(k.containers, created.ID)
	return created.ID
}

// fill writes archive into pair's environment volume.
func (k *forkCopy) fill(pair string, archive []byte) {
	k.t.Helper()
	if _, err := k.cli.CopyToContainer(context.Background(), k.holder(pair), client.CopyToContainerOptions{
		DestinationPath: docker.EnvironmentPath, Content: bytes.NewReader(archive)}); err != nil {
		k.t.Fatal(err)
	}
}

// archiveCopy copies src into dst through the engine's archive endpoints.
func (k *forkCopy) archiveCopy(src, dst string) time.Duration {
	k.t.Helper()
	ctx := context.Background()
	from, to := k.holder(src), k.holder(dst)
	start := time.Now()
	for _, dir := range []string{docker.HomeMount, docker.EnvironmentPath} {
		rc, err := k.cli.CopyFromContainer(ctx, from, client.CopyFromContainerOptions{SourcePath: dir + "/."})
		if err != nil {
			k.t.Fatal(err)
		}
		_, err = k.cli.CopyToContainer(ctx, to, client.CopyToContainerOptions{DestinationPath: dir, Content: rc.Content})
		rc.Content.Close()
		if err != nil {
			k.t.Fatal(err)
		}
	}
	return time.Since(start)
}

// helperCopy copies src into every target with one helper container,
// created before the clock starts.
func (k *forkCopy) helperCopy(src string, targets []string) time.Duration {
	k.t.Helper()
	ctx := context.Background()
	mounts := []mount.Mount{
		{Type: mount.TypeVolume, Source: src + "-home", Target: "/src/home", ReadOnly: true},
		{Type: mount.TypeVolume, Source: src + "-environment", Target: "/src/environment", ReadOnly: true},
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for i, dst := range targets {
		mounts = append(mounts,
			mount.Mount{Type: mount.TypeVolume, Source: dst + "-home", Target: fmt.Sprintf("/dst/%d/home", i)},
			mount.Mount{Type: mount.TypeVolume, Source: dst + "-environment", Target: fmt.Sprintf("/dst/%d/environment", i)})
		fmt.Fprintf(&script, "cp -a /src/home/. /dst/%d/home/ && cp -a /src/environment/. /dst/%d/environment/\n", i, i)
	}
	created, err := k.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: k.prefix + "-helper-" + uuid.NewString()[:8],
		Config: &container.Config{Image: k.image, User: "0:0", NetworkDisabled: true,
			Entrypoint: []string{"/bin/busybox", "sh", "-c", script.String()}},
		HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: mounts},
	})
	if err != nil {
		k.t.Fatal(err)
	}
	k.containers = append(k.containers, created.ID)
	start := time.Now()
	if _, err := k.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		k.t.Fatal(err)
	}
	wait := k.cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case res := <-wait.Result:
		if res.StatusCode != 0 {
			k.t.Fatalf("helper copy exited %d", res.StatusCode)
		}
	case err := <-wait.Error:
		k.t.Fatal(err)
	}
	return time.Since(start)
}

// cleanupPairs removes every container and volume but the source's.
func (k *forkCopy) cleanupPairs() {
	ctx := context.Background()
	keep := map[string]bool{}
	for _, id := range k.containers {
		_, _ = k.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	}
	k.containers = nil
	for _, p := range k.pairs[1:] {
		for _, v := range []string{p + "-home", p + "-environment"} {
			if !keep[v] {
				_, _ = k.cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{Force: true})
			}
		}
	}
}

// cleanup removes everything K0 made.
func (k *forkCopy) cleanup() {
	k.cleanupPairs()
	ctx := context.Background()
	for _, v := range []string{k.pairs[0] + "-home", k.pairs[0] + "-environment"} {
		_, _ = k.cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{Force: true})
	}
}
