package dockertest_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/sandbox/docker/dockertest"
)

const testImage = "berth/runtime:test"

func newClient(t *testing.T, s *dockertest.Server) *client.Client {
	t.Helper()
	c, err := client.New(client.WithHost(s.Host()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup starts a fixture and a negotiated client, and forgets the setup
// calls.
func setup(t *testing.T) (*dockertest.Server, *client.Client, context.Context) {
	t.Helper()
	s := dockertest.Start(t)
	c := newClient(t, s)
	ctx := testContext(t)
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatal(err)
	}
	s.ResetCalls()
	return s, c, ctx
}

func wantCalls(t *testing.T, s *dockertest.Server, want ...string) {
	t.Helper()
	if got := s.CallNames(); !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q", got, want)
	}
}

func TestPingAndNegotiation(t *testing.T) {
	s := dockertest.Start(t)
	c := newClient(t, s)
	ctx := testContext(t)

	// The first request of a client negotiates with a HEAD /_ping.
	info, err := c.Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ClientVersion() != dockertest.APIVersion {
		t.Errorf("negotiated %q, want %q", c.ClientVersion(), dockertest.APIVersion)
	}
	calls := s.Calls()
	if len(calls) != 2 || calls[0].Name != dockertest.CallPing || calls[0].Method != http.MethodHead || calls[0].Version != "" ||
		calls[1].Name != dockertest.CallInfo || calls[1].Path != "/info" || calls[1].Version != "1.51" {
		t.Errorf("calls = %+v", calls)
	}
	i := info.Info
	if i.ID != dockertest.EngineID || i.Name != dockertest.EngineName || i.NCPU <= 0 || i.MemTotal <= 0 ||
		!i.MemoryLimit || !i.CPUCfsQuota || !i.CPUCfsPeriod {
		t.Errorf("info = %+v", i)
	}

	// Later requests do not ping again.
	s.ResetCalls()
	v, err := c.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.APIVersion != "1.51" || v.MinAPIVersion != "1.24" {
		t.Errorf("version = %+v", v)
	}
	wantCalls(t, s, dockertest.CallVersion)

	// GET /_ping answers OK with the version header.
	resp, err := http.Get(s.URL() + "/_ping")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "OK" || resp.Header.Get("Api-Version") != "1.51" {
		t.Errorf("GET /_ping = %d %q %v", resp.StatusCode, body, resp.Header)
	}

	// Versions the engine does not speak are refused.
	for _, p := range []string{"/v1.56/info", "/v1.20/info"} {
		resp, err := http.Get(s.URL() + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", p, resp.StatusCode)
		}
	}
}

func TestFixedVersionClient(t *testing.T) {
	s := dockertest.Start(t)
	c, err := client.New(client.WithHost(s.Host()), client.WithAPIVersion("1.44"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Info(testContext(t), client.InfoOptions{}); err != nil {
		t.Fatal(err)
	}
	calls := s.Calls()
	if len(calls) != 1 || calls[0].Name != dockertest.CallInfo || calls[0].Version != "1.44" {
		t.Errorf("a fixed-version client: calls = %+v, want one info at 1.44 and no ping", calls)
	}
}

func TestVolumes(t *testing.T) {
	s, c, ctx := setup(t)

	created, err := c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: "berth-v1", Labels: map[string]string{"owner": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := created.Volume; v.Name != "berth-v1" || v.Driver != "local" || v.Labels["owner"] != "a" || v.Scope != "local" {
		t.Errorf("created = %+v", v)
	}

	// An existing name answers the existing volume, unchanged.
	again, err := c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: "berth-v1", Labels: map[string]string{"owner": "b"}})
	if err != nil {
		t.Fatalf("create of an existing name: %v", err)
	}
	if again.Volume.Labels["owner"] != "a" {
		t.Errorf("existing volume answered with labels %v, want the original", again.Volume.Labels)
	}
	if v, _ := s.Volume("berth-v1"); v.Labels["owner"] != "a" {
		t.Errorf("existing volume changed: %+v", v)
	}

	got, err := c.VolumeInspect(ctx, "berth-v1", client.VolumeInspectOptions{})
	if err != nil || got.Volume.Labels["owner"] != "a" {
		t.Errorf("inspect = %+v, %v", got.Volume, err)
	}
	if _, err := c.VolumeInspect(ctx, "absent", client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("inspect of an absent volume: %v, want not found", err)
	}

	s.PutVolume("foreign", map[string]string{"owner": "b"})
	list, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", "owner=a")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "berth-v1" {
		t.Errorf("list by label = %+v", list.Items)
	}
	list, err = c.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", "owner")})
	if err != nil || len(list.Items) != 2 {
		t.Errorf("list by label presence = %+v, %v", list.Items, err)
	}
	if _, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("bogus", "x")}); !cerrdefs.IsInvalidArgument(err) {
		t.Errorf("list with an unknown filter: %v, want invalid argument", err)
	}

	if _, err := c.VolumeRemove(ctx, "absent", client.VolumeRemoveOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("remove of an absent volume: %v, want not found", err)
	}
	if _, err := c.VolumeRemove(ctx, "absent", client.VolumeRemoveOptions{Force: true}); err != nil {
		t.Errorf("forced remove of an absent volume: %v, want success", err)
	}
	if _, err := c.VolumeRemove(ctx, "berth-v1", client.VolumeRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Volume("berth-v1"); ok {
		t.Error("volume still there after remove")
	}
	wantCalls(t, s,
		dockertest.CallVolumeCreate, dockertest.CallVolumeCreate, dockertest.CallVolumeInspect, dockertest.CallVolumeInspect,
		dockertest.CallVolumeList, dockertest.CallVolumeList, dockertest.CallVolumeList,
		dockertest.CallVolumeRemove, dockertest.CallVolumeRemove, dockertest.CallVolumeRemove)
}

func tarOf(t *testing.T, files map[string]string) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func createOptions(name string) client.ContainerCreateOptions {
	pids := int64(64)
	return client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:  testImage,
			Labels: map[string]string{"berth.tenant": "t1", "berth.env": "e1"},
			Cmd:    []string{"/berth/agent"},
		},
		HostConfig: &container.HostConfig{
			Resources: container.Resources{NanoCPUs: 500_000_000, Memory: 256 << 20, PidsLimit: &pids},
			Mounts: []mount.Mount{{
				Type: mount.TypeVolume, Source: name + "-data", Target: "/data",
				VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{"berth.tenant": "t1"}},
			}},
		},
	}
}

func TestContainerLifecycle(t *testing.T) {
	s, c, ctx := setup(t)

	if _, err := c.ContainerCreate(ctx, createOptions("berth-c1")); !cerrdefs.IsNotFound(err) {
		t.Errorf("create without the image: %v, want not found", err)
	}
	s.PutImage(testImage)
	created, err := c.ContainerCreate(ctx, createOptions("berth-c1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(created.ID) != 64 {
		t.Errorf("id = %q", created.ID)
	}
	if _, err := c.ContainerCreate(ctx, createOptions("berth-c1")); !cerrdefs.IsConflict(err) {
		t.Errorf("create of a taken name: %v, want conflict", err)
	}
	v, ok := s.Volume("berth-c1-data")
	if !ok || v.Labels["berth.tenant"] != "t1" {
		t.Errorf("mount volume = %+v, %v; want created with the mount's labels", v, ok)
	}

	got, err := c.ContainerInspect(ctx, "berth-c1", client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ins := got.Container
	if ins.ID != created.ID || ins.Name != "/berth-c1" || ins.State.Status != container.StateCreated || ins.State.Running ||
		ins.Config.Labels["berth.tenant"] != "t1" || ins.Config.Image != testImage ||
		ins.HostConfig.NanoCPUs != 500_000_000 || ins.HostConfig.Memory != 256<<20 || *ins.HostConfig.PidsLimit != 64 ||
		len(ins.Mounts) != 1 || ins.Mounts[0].Name != "berth-c1-data" {
		t.Errorf("inspect = %+v", ins)
	}
	if _, err := c.ContainerInspect(ctx, "absent", client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("inspect of an absent container: %v, want not found", err)
	}

	if _, err := c.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{
		DestinationPath: "/etc/berth",
		Content:         tarOf(t, map[string]string{"bootstrap.json": `{"v":1}`}),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyToContainer(ctx, "absent", client.CopyToContainerOptions{DestinationPath: "/", Content: tarOf(t, nil)}); !cerrdefs.IsNotFound(err) {
		t.Errorf("archive into an absent container: %v, want not found", err)
	}
	arch := s.Archives("berth-c1")
	if len(arch) != 1 || arch[0].Path != "/etc/berth" || !arch[0].NoOverwriteDirNonDir || len(arch[0].Entries) != 1 ||
		arch[0].Entries[0].Header.Name != "bootstrap.json" || string(arch[0].Entries[0].Content) != `{"v":1}` {
		t.Errorf("archives = %+v", arch)
	}

	if _, err := c.ContainerStart(ctx, "berth-c1", client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	// Starting a running container is a 304, which the client takes as success.
	if _, err := c.ContainerStart(ctx, "berth-c1", client.ContainerStartOptions{}); err != nil {
		t.Errorf("second start: %v", err)
	}
	snap, _ := s.Container("berth-c1")
	if snap.State != dockertest.StateRunning || snap.StartedAt.IsZero() {
		t.Errorf("after start: %+v", snap)
	}

	if _, err := c.VolumeRemove(ctx, "berth-c1-data", client.VolumeRemoveOptions{Force: true}); !cerrdefs.IsConflict(err) {
		t.Errorf("remove of a volume in use: %v, want conflict", err)
	}
	if _, err := c.ContainerRemove(ctx, "berth-c1", client.ContainerRemoveOptions{}); !cerrdefs.IsConflict(err) {
		t.Errorf("remove of a running container without force: %v, want conflict", err)
	}
	if _, err := c.ContainerRemove(ctx, "berth-c1", client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContainerRemove(ctx, "berth-c1", client.ContainerRemoveOptions{Force: true}); !cerrdefs.IsNotFound(err) {
		t.Errorf("remove of an absent container: %v, want not found", err)
	}
	if _, ok := s.Volume("berth-c1-data"); !ok {
		t.Error("removing a container removed its named volume")
	}

	wantCalls(t, s,
		dockertest.CallContainerCreate, dockertest.CallContainerCreate, dockertest.CallContainerCreate,
		dockertest.CallContainerInspect, dockertest.CallContainerInspect,
		dockertest.CallContainerArchive, dockertest.CallContainerArchive,
		dockertest.CallContainerStart, dockertest.CallContainerStart,
		dockertest.CallVolumeRemove, dockertest.CallContainerRemove, dockertest.CallContainerRemove, dockertest.CallContainerRemove)
	calls := s.Calls()
	if q := calls[len(calls)-2].Query; q.Get("force") != "1" || q.Get("v") != "1" {
		t.Errorf("remove query = %v", q)
	}
	for _, call := range calls {
		if call.Mutating != dockertest.Mutating(call.Name) {
			t.Errorf("call %+v: Mutating disagrees with Mutating(name)", call)
		}
	}
}

func TestCreateValidation(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutImage(testImage)
	opts := createOptions("berth-bad")
	opts.HostConfig.NanoCPUs = 1000 * 1e9
	if _, err := c.ContainerCreate(ctx, opts); !cerrdefs.IsInvalidArgument(err) {
		t.Errorf("more CPUs than the engine has: %v, want invalid argument", err)
	}
	opts = createOptions("berth-bad")
	opts.HostConfig.Memory = 1 << 20
	if _, err := c.ContainerCreate(ctx, opts); !cerrdefs.IsInvalidArgument(err) {
		t.Errorf("memory under 6MB: %v, want invalid argument", err)
	}
	opts = createOptions("bad name!")
	if _, err := c.ContainerCreate(ctx, opts); !cerrdefs.IsInvalidArgument(err) {
		t.Errorf("invalid name: %v, want invalid argument", err)
	}
	if len(s.Containers()) != 0 {
		t.Errorf("refused creates left containers: %+v", s.Containers())
	}

	// A read-only rootfs refuses archives outside writable mounts.
	opts = createOptions("berth-ro")
	opts.HostConfig.ReadonlyRootfs = true
	if _, err := c.ContainerCreate(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyToContainer(ctx, "berth-ro", client.CopyToContainerOptions{DestinationPath: "/etc", Content: tarOf(t, nil)}); !cerrdefs.IsPermissionDenied(err) {
		t.Errorf("archive into a read-only rootfs: %v, want permission denied", err)
	}
	if _, err := c.CopyToContainer(ctx, "berth-ro", client.CopyToContainerOptions{DestinationPath: "/data/x", Content: tarOf(t, nil)}); err != nil {
		t.Errorf("archive into a writable volume of a read-only rootfs: %v", err)
	}
}

func TestContainerListByLabel(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutImage(testImage)
	if _, err := c.ContainerCreate(ctx, createOptions("berth-mine")); err != nil {
		t.Fatal(err)
	}
	foreign := s.PutContainer("berth-foreign", map[string]string{"berth.tenant": "t2", "berth.env": "e1"}, dockertest.StateRunning)

	list := func(all bool, f client.Filters) []string {
		t.Helper()
		res, err := c.ContainerList(ctx, client.ContainerListOptions{All: all, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range res.Items {
			names = append(names, strings.Join(it.Names, ","))
		}
		slices.Sort(names)
		return names
	}
	if got := list(true, make(client.Filters).Add("label", "berth.tenant=t1")); !slices.Equal(got, []string{"/berth-mine"}) {
		t.Errorf("label=berth.tenant=t1: %q", got)
	}
	if got := list(true, make(client.Filters).Add("label", "berth.env=e1")); !slices.Equal(got, []string{"/berth-foreign", "/berth-mine"}) {
		t.Errorf("label=berth.env=e1: %q", got)
	}
	if got := list(true, make(client.Filters).Add("label", "berth.env=e1", "berth.tenant=t2")); !slices.Equal(got, []string{"/berth-foreign"}) {
		t.Errorf("two labels (all must match): %q", got)
	}
	if got := list(false, make(client.Filters).Add("label", "berth.env")); !slices.Equal(got, []string{"/berth-foreign"}) {
		t.Errorf("without all, only running: %q", got)
	}
	if got := list(true, make(client.Filters).Add("name", "mine")); !slices.Equal(got, []string{"/berth-mine"}) {
		t.Errorf("name filter: %q", got)
	}
	if got := list(true, make(client.Filters).Add("id", foreign[:12])); !slices.Equal(got, []string{"/berth-foreign"}) {
		t.Errorf("id filter: %q", got)
	}
	if _, err := c.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).Add("nope", "x")}); !cerrdefs.IsInvalidArgument(err) {
		t.Errorf("unknown filter: %v, want invalid argument", err)
	}
	calls := s.Calls()
	if f := calls[len(calls)-1].Query.Get("filters"); f != `{"nope":{"x":true}}` {
		t.Errorf("filters sent as %q", f)
	}
}

func TestStats(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutImage(testImage)
	if _, err := c.ContainerCreate(ctx, createOptions("berth-s")); err != nil {
		t.Fatal(err)
	}
	read := func() container.StatsResponse {
		t.Helper()
		res, err := c.ContainerStats(ctx, "berth-s", client.ContainerStatsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var st container.StatsResponse
		if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := read(); st.CPUStats.CPUUsage.TotalUsage != 0 || st.MemoryStats.Usage != 0 {
		t.Errorf("stats of a created container = %+v, want zeros", st)
	}
	if _, err := c.ContainerStart(ctx, "berth-s", client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	st := read()
	if st.CPUStats.CPUUsage.TotalUsage == 0 || st.CPUStats.OnlineCPUs == 0 || st.CPUStats.SystemUsage == 0 ||
		st.MemoryStats.Usage == 0 || st.MemoryStats.Limit != 256<<20 || st.PidsStats.Current == 0 || st.PidsStats.Limit != 64 {
		t.Errorf("stats = %+v", st)
	}
	if !st.PreRead.IsZero() {
		t.Errorf("one-shot stats carry a previous sample: %+v", st.PreCPUStats)
	}
	if q := s.Calls()[len(s.Calls())-1].Query; q.Get("stream") != "false" || q.Get("one-shot") != "true" {
		t.Errorf("stats query = %v", q)
	}
	if _, err := c.ContainerStats(ctx, "absent", client.ContainerStatsOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("stats of an absent container: %v, want not found", err)
	}
}

func TestImageInspect(t *testing.T) {
	s, c, ctx := setup(t)
	if _, err := c.ImageInspect(ctx, testImage); !cerrdefs.IsNotFound(err) {
		t.Errorf("inspect of an absent image: %v, want not found", err)
	}
	s.PutImage(testImage)
	got, err := c.ImageInspect(ctx, testImage)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.ID, "sha256:") || !slices.Contains(got.RepoTags, testImage) {
		t.Errorf("image = %+v", got.InspectResponse)
	}
	if _, err := c.ImageInspect(ctx, got.ID); err != nil {
		t.Errorf("inspect by ID: %v", err)
	}
	wantCalls(t, s, dockertest.CallImageInspect, dockertest.CallImageInspect, dockertest.CallImageInspect)
	if p := s.Calls()[1].Path; p != "/images/"+testImage+"/json" {
		t.Errorf("path = %q", p)
	}
}

func TestUnknownCall(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutContainer("berth-u", nil, dockertest.StateRunning)
	if _, err := c.ContainerRestart(ctx, "berth-u", client.ContainerRestartOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("an unmodelled call: %v, want not found", err)
	}
	calls := s.Calls()
	if len(calls) != 1 || calls[0].Name != "unknown POST /containers/berth-u/restart" || !calls[0].Mutating {
		t.Errorf("calls = %+v", calls)
	}
	if got := s.CallsWithout(calls[0].Name); len(got) != 0 {
		t.Errorf("CallsWithout = %+v", got)
	}
}

// TestPauseAndArchiveRead: pause and unpause move a running container to
// paused and back (same start, same process), refused otherwise; an
// archive written into a volume mount is read back through another
// container mounting the same volume, relative to the path read.
func TestPauseAndArchiveRead(t *testing.T) {
	s, c, ctx := setup(t)
	s.PutImage(testImage)
	id := s.PutContainer("berth-p", nil, dockertest.StateRunning)
	before, _ := s.Container(id)
	if _, err := c.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); got.Container.State.Status != "paused" || !got.Container.State.Paused {
		t.Fatalf("after pause: %+v", got.Container.State)
	}
	if _, err := c.ContainerPause(ctx, id, client.ContainerPauseOptions{}); !cerrdefs.IsConflict(err) {
		t.Errorf("pause of a paused container: %v, want a conflict", err)
	}
	if _, err := c.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.Container(id); after.State != dockertest.StateRunning || !after.StartedAt.Equal(before.StartedAt) {
		t.Fatalf("after unpause: %+v", after)
	}
	if _, err := c.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); !cerrdefs.IsConflict(err) {
		t.Errorf("unpause of a running container: %v, want a conflict", err)
	}

	mk := func(name string) string {
		res, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: &container.Config{Image: testImage, Cmd: []string{"x"}},
			HostConfig: &container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: "shared", Target: "/data"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	a, b := mk("berth-a"), mk("berth-b")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "dir/", Typeflag: tar.TypeDir, Mode: 0o750, Uid: 1000})
	_ = tw.WriteHeader(&tar.Header{Name: "dir/f", Typeflag: tar.TypeReg, Mode: 0o600, Uid: 2000, Size: 2})
	_, _ = tw.Write([]byte("hi"))
	_ = tw.Close()
	if _, err := c.CopyToContainer(ctx, a, client.CopyToContainerOptions{DestinationPath: "/data", Content: &buf}); err != nil {
		t.Fatal(err)
	}
	res, err := c.CopyFromContainer(ctx, b, client.CopyFromContainerOptions{SourcePath: "/data/."})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	var got []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(tr)
		got = append(got, fmt.Sprintf("%s %o %d %s", h.Name, h.Mode, h.Uid, data))
	}
	if want := []string{"dir/ 750 1000 ", "dir/f 600 2000 hi"}; !slices.Equal(got, want) {
		t.Fatalf("read back %q, want %q", got, want)
	}
}
