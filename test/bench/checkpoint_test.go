package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// P7's workspace sizes.
var checkpointSizes = []struct {
	label string
	bytes int
}{{"10 MB", 10_000_000}, {"100 MB", 100_000_000}}

// workspaceArchive is a tar, relative to /environment, of about n bytes of
// random data: one large file and a hundred small ones under workspace/.
func workspaceArchive(t testing.TB, n int, seed uint64) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, size int) {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Uid: 1000, Gid: 1000, Size: int64(size), ModTime: time.Unix(1_700_000_000, 0)}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	small := n / 10 / 100
	for i := range 100 {
		add(fmt.Sprintf("workspace/small-%03d", i), small)
	}
	add("workspace/large.bin", n-100*small)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkpointRows measures P7: Suspend and Resume through Core's node proxy
// and a node agent on the real engine, for each workspace size, against
// the engine alone copying the same bytes between volumes with the same
// client (engineCopy). Per sample: a Session's compute with the workspace
// written in, Berth's Suspend, the baseline copy from the snapshot, Berth's
// Resume into the next incarnation, the baseline copy again; everything is
// removed before the next sample.
func checkpointRows(t testing.TB, samples int) []*row {
	t.Helper()
	_, n, cli := stack.EngineNode(t)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	image := testenv.RuntimeImage(t)
	ctx := context.Background()
	var rows []*row
	for i, size := range checkpointSizes {
		suspend := &row{ID: fmt.Sprintf("P7%c", 'a'+2*i), Kind: latency, Goal: 2,
			Measure:  "Suspend of a " + size.label + " workspace via Core's proxy and a node agent",
			Baseline: "engine: copy the same volumes' bytes into new volumes (archive read and write)"}
		resume := &row{ID: fmt.Sprintf("P7%c", 'b'+2*i), Kind: latency, Goal: 2,
			Measure:  "Resume of a " + size.label + " snapshot into a new incarnation, Runtime started",
			Baseline: "engine: copy the same volumes' bytes into new volumes (archive read and write)"}
		archive := workspaceArchive(t, size.bytes, uint64(i+1))
		for range samples {
			ref := contracttest.NewReference()
			info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources))
			if err != nil {
				t.Fatalf("Create via the node: %v", err)
			}
			if _, err := cli.CopyToContainer(ctx, info.ProviderID, client.CopyToContainerOptions{DestinationPath: docker.EnvironmentPath, Content: bytes.NewReader(archive)}); err != nil {
				t.Fatalf("write the workspace: %v", err)
			}
			first, err := proxy.Initial(ref)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := proxy.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: uuid.NewString()})
			if err != nil {
				t.Fatalf("Suspend via the node: %v", err)
			}
			berthSuspend := time.Since(start)
			holder := res.Snapshot.ID
			suspend.add(berthSuspend, engineCopy(t, cli, image, holder), 0)

			second, err := proxy.NewCompute(first)
			if err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			resumed, err := proxy.Resume(ctx, sandbox.ResumeRequest{
				Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(),
				Resources: stack.Resources, Bootstrap: contracttest.CreateRequest(ref, stack.Resources).Bootstrap,
			})
			if err != nil {
				t.Fatalf("Resume via the node: %v", err)
			}
			resume.add(time.Since(start), engineCopy(t, cli, image, holder), 0)

			if err := proxy.DeleteSnapshot(ctx, ref, res.Snapshot); err != nil {
				t.Fatalf("DeleteSnapshot via the node: %v", err)
			}
			if err := proxy.KillCompute(ctx, resumed.Compute.Compute); err != nil {
				t.Fatalf("KillCompute via the node: %v", err)
			}
		}
		rows = append(rows, suspend, resume)
	}
	return rows
}

// engineCopy is P7's baseline: what a checkpoint must at least do, done by
// the engine alone through the adapter's client: a never-started
// container mounting two new volumes, then /home and /environment of
// container from read from the engine's archive and written into it. The
// time covers the container create and both copies; the container and
// the volumes are removed afterwards, untimed.
func engineCopy(t testing.TB, cli *client.Client, image, from string) time.Duration {
	t.Helper()
	ctx := context.Background()
	name := "berth-bench-copy-" + uuid.NewString()[:8]
	start := time.Now()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   name,
		Config: &container.Config{Image: image, Entrypoint: []string{"/never-started"}, NetworkDisabled: true},
		HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: name + "-home", Target: docker.HomeMount},
			{Type: mount.TypeVolume, Source: name + "-environment", Target: docker.EnvironmentPath},
		}},
	})
	if err != nil {
		t.Fatalf("baseline container: %v", err)
	}
	for _, dir := range []string{docker.HomeMount, docker.EnvironmentPath} {
		src, err := cli.CopyFromContainer(ctx, from, client.CopyFromContainerOptions{SourcePath: dir + "/."})
		if err != nil {
			t.Fatalf("baseline read %s: %v", dir, err)
		}
		_, err = cli.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{DestinationPath: dir, Content: src.Content})
		_ = src.Content.Close()
		if err != nil {
			t.Fatalf("baseline write %s: %v", dir, err)
		}
	}
	d := time.Since(start)
	if _, err := cli.ContainerRemove(ctx, created.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatalf("baseline cleanup: %v", err)
	}
	for _, v := range []string{name + "-home", name + "-environment"} {
		if _, err := cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{}); err != nil {
			t.Fatalf("baseline cleanup: %v", err)
		}
	}
	return d
}
