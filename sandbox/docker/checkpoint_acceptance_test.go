package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
)

// The checkpoint tests run the adapter's filesystem checkpoints against
// the real engine. The contents are checked by an observer of their own:
// the engine's archive of /home and /environment read by the test (every
// entry's name, type, mode, owner, size, link target and content digest)
// and the Runtime's own `ls -lnRa` inside the container.

// workload is the mixed tree the checkpoint tests write: about 100 MB of
// random files of many sizes and modes, a symbolic link and a dangling
// one, empty directories, a name with spaces and a file of another owner
// inside /home/runtime.
type workload struct {
	home, environment []byte // tar archives, relative to /home and /environment
	bytes             int64
}

func newWorkload(t testing.TB, seed uint64) workload {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var w workload
	build := func(entries func(add func(h tar.Header, data []byte))) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		entries(func(h tar.Header, data []byte) {
			if h.Uid == 0 && h.Gid == 0 && h.Name != "runtime/other-owned" {
				h.Uid, h.Gid = 1000, 1000
			}
			h.ModTime = time.Unix(1_700_000_000, 0)
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(data))
				w.bytes += h.Size
			}
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(data); err != nil {
				t.Fatal(err)
			}
		})
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	dir := func(name string, mode int64) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: mode}
	}
	file := func(name string, mode int64) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode}
	}
	w.environment = build(func(add func(tar.Header, []byte)) {
		add(dir("workspace/", 0o755), nil)
		add(file("workspace/big.bin", 0o644), random(64<<20))
		add(dir("workspace/src/", 0o750), nil)
		for i := range 400 {
			add(file(fmt.Sprintf("workspace/src/file-%03d.txt", i), []int64{0o644, 0o600, 0o755}[i%3]), random(1+rng.IntN(80<<10)))
		}
		add(file("workspace/a name with spaces.txt", 0o644), []byte("spaces\n"))
		add(file("workspace/empty-file", 0o600), nil)
		add(tar.Header{Name: "workspace/link", Typeflag: tar.TypeSymlink, Linkname: "src/file-001.txt", Mode: 0o777}, nil)
		add(tar.Header{Name: "workspace/dangling", Typeflag: tar.TypeSymlink, Linkname: "../nowhere", Mode: 0o777}, nil)
		add(dir("workspace/empty/", 0o700), nil)
		add(dir("workspace/empty/deeper/", 0o755), nil)
		add(dir("staging/", 0o755), nil)
		add(file("staging/input.json", 0o640), []byte(`{"k":"v"}`))
	})
	w.home = build(func(add func(tar.Header, []byte)) {
		add(dir("runtime/", 0o700), nil)
		add(dir("runtime/cache/", 0o755), nil)
		for i := range 20 {
			add(file(fmt.Sprintf("runtime/cache/blob-%02d", i), 0o644), random(1<<20))
		}
		add(tar.Header{Name: "runtime/other-owned", Typeflag: tar.TypeReg, Mode: 0o640, Uid: 2000, Gid: 2000}, []byte("not the runtime user's\n"))
	})
	return w
}

// write puts the workload into a running container.
func (e *engine) write(id string, w workload) {
	e.t.Helper()
	ctx := context.Background()
	for dest, archive := range map[string][]byte{docker.HomeMount: w.home, docker.EnvironmentPath: w.environment} {
		if _, err := e.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dest, Content: bytes.NewReader(archive)}); err != nil {
			e.t.Fatalf("write the workload to %s: %v", dest, err)
		}
	}
}

// treeDigest reads /home and /environment of container id through the
// engine's archive and digests every entry but the bootstrap file (a
// resume writes a fresh one): name, type, mode, owner, size, link target
// and content. It also returns the number of entries and content bytes.
func (e *engine) treeDigest(id string) (digest string, entries int, size int64) {
	e.t.Helper()
	ctx := context.Background()
	var lines []string
	for _, dir := range []string{docker.HomeMount, docker.EnvironmentPath} {
		res, err := e.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: dir + "/."})
		if err != nil {
			e.t.Fatalf("read %s: %v", dir, err)
		}
		tr := tar.NewReader(res.Content)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				e.t.Fatalf("read %s: %v", dir, err)
			}
			if dir == docker.HomeMount && strings.HasSuffix(h.Name, "runtime/runtime-bootstrap.json") {
				continue
			}
			sum := sha256.New()
			n, err := io.Copy(sum, tr)
			if err != nil {
				e.t.Fatal(err)
			}
			size += n
			lines = append(lines, fmt.Sprintf("%s|%s|%c|%o|%d:%d|%d|%s|%x", dir, h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Size, h.Linkname, sum.Sum(nil)))
		}
		_ = res.Content.Close()
	}
	slices.Sort(lines)
	all := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(all[:]), len(lines), size
}

// listing is the Runtime user's own view: `ls -lnRa` of both trees (mode,
// links, owner, size, name and link target; not the times, which a
// checkpoint does not promise for directories), the bootstrap file's line
// left out, and so are the "total" lines: they count the disk blocks the
// filesystem allocated (the rewritten bootstrap file's among them), not
// anything of the workspace, and differed by one block in about one run
// of five.
func (e *engine) listing(c sandbox.Compute) string {
	e.t.Helper()
	res, err := e.p.RunCommandCompute(context.Background(), c, sh("ls -lnRa --full-time /home /environment"))
	if err != nil || res.ExitCode != 0 {
		e.t.Fatalf("ls: %v %+v", err, res)
	}
	var keep []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if strings.Contains(line, "runtime-bootstrap.json") || strings.HasPrefix(line, "total ") {
			continue
		}
		// perms links uid gid size date time zone name...
		if f := strings.Fields(line); len(f) >= 9 {
			line = strings.Join(append(f[:5:5], f[8:]...), " ")
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

func (e *engine) inspect(name string) (container.InspectResponse, bool) {
	e.t.Helper()
	res, err := e.cli.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if err != nil {
		return container.InspectResponse{}, false
	}
	return res.Container, true
}

func (e *engine) volumeExists(name string) bool {
	_, err := e.cli.VolumeInspect(context.Background(), name, client.VolumeInspectOptions{})
	return err == nil
}

// TestAcceptanceSuspendResumeIsByteIdentical writes about 100 MB of mixed
// files into a running Session's workspace and home, suspends it (the
// source container and its volumes gone, the snapshot labelled), suspends
// again under the same operation id (nothing captured again), resumes
// into a new incarnation with a fresh bootstrap and compares both trees:
// identical, by the engine's archive and by the Runtime's listing. Then
// the snapshot and the incarnation are removed exactly.
func TestAcceptanceSuspendResumeIsByteIdentical(t *testing.T) {
	e := newEngine(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	info := e.create(ref)
	first, err := e.p.Initial(ref)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkload(t, 14)
	e.write(info.ProviderID, w)
	before, entries, size := e.treeDigest(info.ProviderID)
	if size < 100_000_000 || entries < 400 {
		t.Fatalf("the workload holds %d entries and %d bytes; want about 100 MB", entries, size)
	}
	beforeLs := e.listing(first)

	op := uuid.NewString()
	start := time.Now()
	res, err := e.p.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: op})
	if err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	t.Logf("Suspend of %d entries, %d bytes: %v", entries, size, time.Since(start).Round(time.Millisecond))
	if res.Source.State != sandbox.ComputeAbsent || res.Snapshot.ID != e.p.SnapshotName(ref, op) ||
		!strings.Contains(res.Snapshot.Provenance, "digest=sha256:") {
		t.Fatalf("Suspend = %+v", res)
	}
	if _, ok := e.inspect(info.ProviderID); ok {
		t.Fatal("the source container is still there after Suspend")
	}
	for _, v := range []string{e.p.HomeVolume(ref), e.p.EnvironmentVolume(ref)} {
		if e.volumeExists(v) {
			t.Fatalf("the source volume %s is still there after Suspend", v)
		}
	}
	holder, ok := e.inspect(res.Snapshot.ID)
	if !ok || holder.State == nil || holder.State.Status != container.StateCreated ||
		holder.Config.Labels[docker.LabelAllocation] != ref.AllocationID || holder.Config.Labels[docker.LabelSnapshotOperation] != op {
		t.Fatalf("snapshot holder %+v", holder.Config)
	}
	for _, v := range []string{res.Snapshot.ID + "-home", res.Snapshot.ID + "-environment"} {
		vol, err := e.cli.VolumeInspect(ctx, v, client.VolumeInspectOptions{})
		if err != nil || vol.Volume.Labels[docker.LabelAllocation] != ref.AllocationID || vol.Volume.Labels[docker.LabelSnapshotOperation] != op {
			t.Fatalf("snapshot volume %s: %+v %v", v, vol.Volume.Labels, err)
		}
	}

	// The same operation again captures nothing: the same snapshot, the
	// same holder, the same containers and volumes on the engine.
	beforeC, beforeV := e.owned()
	again, err := e.p.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: op})
	if err != nil || again.Snapshot != res.Snapshot {
		t.Fatalf("Suspend again = %+v, %v; want %+v", again, err, res.Snapshot)
	}
	if h, _ := e.inspect(res.Snapshot.ID); h.ID != holder.ID {
		t.Fatal("the second Suspend replaced the holder")
	}
	if afterC, afterV := e.owned(); !sameSet(beforeC, afterC) || !sameSet(beforeV, afterV) {
		t.Fatalf("the second Suspend changed the engine: containers %v -> %v, volumes %v -> %v", beforeC, afterC, beforeV, afterV)
	}
	observed, err := e.p.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: op, ObserveOnly: true})
	if err != nil || observed.Snapshot != res.Snapshot || observed.Source.State != sandbox.ComputeAbsent {
		t.Fatalf("Suspend ObserveOnly = %+v, %v", observed, err)
	}

	second, err := e.p.NewCompute(first)
	if err != nil {
		t.Fatal(err)
	}
	fresh := contracttest.CreateRequest(ref, resources).Bootstrap
	start = time.Now()
	resumed, err := e.p.Resume(ctx, sandbox.ResumeRequest{
		Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(), Resources: resources, Bootstrap: fresh,
	})
	if err != nil || resumed.Compute.State != sandbox.ComputeRunning || resumed.Compute.Compute.ID == "" {
		t.Fatalf("Resume = %+v, %v", resumed, err)
	}
	t.Logf("Resume: %v", time.Since(start).Round(time.Millisecond))
	second = resumed.Compute.Compute
	after, afterEntries, afterSize := e.treeDigest(second.ID)
	if after != before || afterEntries != entries || afterSize != size {
		t.Fatalf("restored tree %s (%d entries, %d bytes) differs from the captured %s (%d entries, %d bytes)",
			after, afterEntries, afterSize, before, entries, size)
	}
	if got := e.listing(second); got != beforeLs {
		b, a := strings.Split(beforeLs, "\n"), strings.Split(got, "\n")
		var diff []string
		for i := range max(len(a), len(b)) {
			var x, y string
			if i < len(b) {
				x = b[i]
			}
			if i < len(a) {
				y = a[i]
			}
			if x != y {
				diff = append(diff, "- "+x, "+ "+y)
			}
		}
		t.Fatalf("the Runtime's listing differs after the restore:\n%s", strings.Join(diff, "\n"))
	}
	want, err := runtimebootstrap.Encode(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got := e.run2(second, "cat /home/runtime/runtime-bootstrap.json")
	if got != string(want) {
		t.Fatal("the restored incarnation does not hold the fresh bootstrap file")
	}
	if gi, err := e.p.GetCompute(ctx, second); err != nil || gi.State != sandbox.ComputeRunning {
		t.Fatalf("GetCompute = %+v, %v", gi, err)
	}

	// Exact cleanup: the snapshot, then the incarnation; repeated calls
	// find them absent.
	for range 2 {
		if err := e.p.DeleteSnapshot(ctx, ref, res.Snapshot); err != nil {
			t.Fatalf("DeleteSnapshot: %v", err)
		}
	}
	if _, ok := e.inspect(res.Snapshot.ID); ok || e.volumeExists(res.Snapshot.ID+"-home") || e.volumeExists(res.Snapshot.ID+"-environment") {
		t.Fatal("the snapshot is still there after DeleteSnapshot")
	}
	for range 2 {
		if err := e.p.KillCompute(ctx, second); err != nil {
			t.Fatalf("KillCompute: %v", err)
		}
	}
	if _, ok := e.inspect(second.Name); ok || e.volumeExists(second.Name+"-home") {
		t.Fatal("the incarnation is still there after KillCompute")
	}
	e.kill(ref)
}

// run2 runs a shell command in incarnation c and returns its output.
func (e *engine) run2(c sandbox.Compute, script string) string {
	e.t.Helper()
	res, err := e.p.RunCommandCompute(context.Background(), c, sh(script))
	if err != nil || res.ExitCode != 0 {
		e.t.Fatalf("%s: %v %+v", script, err, res)
	}
	return string(res.Stdout)
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestAcceptanceSnapshotNameCollision: a foreign volume under the
// snapshot's name makes Suspend refuse before it pauses anything, and the
// volume is never touched; DeleteSnapshot refuses it too.
func TestAcceptanceSnapshotNameCollision(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	ref := contracttest.NewReference()
	info := e.create(ref)
	first, _ := e.p.Initial(ref)
	op := uuid.NewString()
	name := e.p.SnapshotName(ref, op) + "-environment"
	if _, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: map[string]string{"io.example.owner": "someone"}}); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = e.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true}) }()
	if _, err := e.p.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: op}); !errors.Is(err, errdefs.ErrOwnership) {
		t.Fatalf("Suspend = %v; want ErrOwnership", err)
	}
	if c, ok := e.inspect(info.ProviderID); !ok || c.State.Status != container.StateRunning {
		t.Fatal("the source is not running any more")
	}
	if err := e.p.DeleteSnapshot(ctx, ref, sandbox.SnapshotIdentity{ID: e.p.SnapshotName(ref, op)}); !errors.Is(err, errdefs.ErrOwnership) {
		t.Fatalf("DeleteSnapshot = %v; want ErrOwnership", err)
	}
	v, err := e.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err != nil || v.Volume.Labels["io.example.owner"] != "someone" {
		t.Fatalf("the foreign volume changed: %+v %v", v.Volume, err)
	}
	e.kill(ref)
}

// TestAcceptanceResumeComputeThawsOnlyAPausedSource: after an aborted
// suspend (the source paused) ResumeCompute thaws the same container; a
// stopped one is refused and stays stopped.
func TestAcceptanceResumeComputeThawsOnlyAPausedSource(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	ref := contracttest.NewReference()
	info := e.create(ref)
	first, _ := e.p.Initial(ref)
	if _, err := e.cli.ContainerPause(ctx, info.ProviderID, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if gi, err := e.p.GetCompute(ctx, first); err != nil || gi.State != sandbox.ComputePaused {
		t.Fatalf("GetCompute = %+v, %v; want paused", gi, err)
	}
	got, err := e.p.ResumeCompute(ctx, first)
	if err != nil || got.State != sandbox.ComputeRunning || got.Compute.ID != info.ProviderID {
		t.Fatalf("ResumeCompute = %+v, %v", got, err)
	}
	if _, err := e.cli.ContainerStop(ctx, info.ProviderID, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.ResumeCompute(ctx, first); !errors.Is(err, errdefs.ErrRuntimeNotRunning) {
		t.Fatalf("ResumeCompute of a stopped source = %v; want ErrRuntimeNotRunning", err)
	}
	if c, _ := e.inspect(info.ProviderID); c.State.Status != container.StateExited {
		t.Fatalf("the stopped source is %s", c.State.Status)
	}
	e.kill(ref)
}

// suspendedAndResumed creates ref, suspends its first incarnation and
// resumes the snapshot into the second, and returns both.
func (e *engine) suspendedAndResumed(ref sandbox.Reference) (sandbox.SnapshotIdentity, sandbox.Compute) {
	e.t.Helper()
	ctx := context.Background()
	e.create(ref)
	first, _ := e.p.Initial(ref)
	res, err := e.p.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: uuid.NewString()})
	if err != nil {
		e.t.Fatalf("Suspend: %v", err)
	}
	second, _ := e.p.NewCompute(first)
	if _, err := e.p.Resume(ctx, sandbox.ResumeRequest{
		Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(), Resources: resources,
		Bootstrap: contracttest.CreateRequest(ref, resources).Bootstrap,
	}); err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	return res.Snapshot, second
}

// TestAcceptanceKillRemovesEveryIncarnationAndSnapshot: Kill of a
// Session suspended and resumed removes the resumed incarnation and the
// snapshot (and settles the first incarnation with its tombstone): the
// engine holds nothing of the allocation but the tombstone.
func TestAcceptanceKillRemovesEveryIncarnationAndSnapshot(t *testing.T) {
	e := newEngine(t, false)
	ref := contracttest.NewReference()
	e.suspendedAndResumed(ref)
	if cs, vs := e.owned(); len(cs) != 2 || len(vs) != 4 {
		t.Fatalf("before Kill: %d containers and %d volumes, want 2 and 4 (the incarnation and the snapshot)", len(cs), len(vs))
	}
	e.kill(ref)
	e.kill(ref)
	cs, vs := e.owned()
	tc, tv := e.tombstones()
	if !sameSet(cs, tc) || !sameSet(vs, tv) || len(tc) != 1 {
		t.Fatalf("after Kill: containers %v and volumes %v, want only the tombstone (%v, %v)", cs, vs, tc, tv)
	}
}

// TestAcceptanceKillBesideAForeignFirstName is issue 26's item 1: after a
// suspension removed the first incarnation and a resume made the second,
// another tenant's container takes the first incarnation's name. Kill
// removes the second incarnation and the snapshot (every owned resource
// of the Reference, whatever holds the first name) and touches nothing
// foreign.
func TestAcceptanceKillBesideAForeignFirstName(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	ref := contracttest.NewReference()
	snapshot, second := e.suspendedAndResumed(ref)
	foreign := e.p.Labels(ref)
	foreign[docker.LabelTenant] = uuid.NewString()
	cc, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   e.p.Name(ref),
		Config: &container.Config{Image: e.image, Cmd: []string{"true"}, Labels: foreign},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.cli.ContainerRemove(ctx, cc.ID, client.ContainerRemoveOptions{Force: true}) })

	e.kill(ref)
	e.kill(ref)
	if _, ok := e.inspect(second.Name); ok {
		t.Error("Kill left the second incarnation on the engine")
	}
	if _, ok := e.inspect(snapshot.ID); ok {
		t.Error("Kill left the snapshot's holder on the engine")
	}
	// Every resource left with the installation's label is the foreign
	// container (it carries it: only its tenant differs).
	cs, vs := e.owned()
	if len(cs) != 1 || cs[0] != cc.ID || len(vs) != 0 {
		t.Errorf("after Kill: containers %v and volumes %v; want only the foreign container %s", cs, vs, cc.ID)
	}
	if _, err := e.cli.ContainerInspect(ctx, cc.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("the foreign container is gone: %v", err)
	}
}

// TestAcceptanceKillComputeClaimsAnUnknownRestoreTarget (issue 26, item
// 3) on a real engine: a restore target that nothing holds, whose
// instance Core never learned, is claimed by KillCompute (a never-started
// tombstone under its name, mounting its two volumes); GetCompute and an
// observe-only Resume then return its absence receipt, a Resume into it
// is refused and makes nothing, and the allocation's Kill leaves the claim
// for Housekeep (the engine that could hold the attempt's requests still
// runs) while removing everything else.
func TestAcceptanceKillComputeClaimsAnUnknownRestoreTarget(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	ref := contracttest.NewReference()
	e.create(ref)
	first, _ := e.p.Initial(ref)
	res, err := e.p.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: uuid.NewString()})
	if err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	target, _ := e.p.NewCompute(first)
	req := sandbox.ResumeRequest{Snapshot: res.Snapshot, Target: target, OperationID: uuid.NewString(), Resources: resources,
		Bootstrap: contracttest.CreateRequest(ref, resources).Bootstrap}

	observe := req
	observe.ObserveOnly = true
	if _, err := e.p.Resume(ctx, observe); !errdefs.IsNotFound(err) {
		t.Fatalf("observe-only Resume of a free target = %v; want ErrNotFound (no receipt)", err)
	}
	if err := e.p.KillCompute(ctx, target); err != nil {
		t.Fatalf("KillCompute of the unknown target: %v", err)
	}
	if err := e.p.KillCompute(ctx, target); err != nil {
		t.Fatalf("KillCompute of the claimed target: %v", err)
	}
	got, err := e.p.GetCompute(ctx, target)
	if err != nil || !got.AbsenceReceipt || got.State != sandbox.ComputeAbsent || got.Compute.ID != "" {
		t.Fatalf("GetCompute of the claimed target = %+v, %v; want its absence receipt", got, err)
	}
	seen, err := e.p.Resume(ctx, observe)
	if err != nil || !seen.Compute.AbsenceReceipt {
		t.Fatalf("observe-only Resume of the claimed target = %+v, %v; want its absence receipt", seen, err)
	}
	if _, err := e.p.Resume(ctx, req); !errdefs.IsExists(err) {
		t.Fatalf("Resume into the claimed target = %v; want ErrExists", err)
	}
	claim, ok := e.inspect(target.Name)
	if !ok || claim.Config.Labels[docker.LabelTombstone] != "1" || claim.State.Status != container.StateCreated {
		t.Fatalf("the claim is not a never-started tombstone: found %v", ok)
	}

	e.kill(ref)
	cs, vs := e.owned()
	if len(cs) != 1 || cs[0] != claim.ID || len(vs) != 2 {
		t.Fatalf("after Kill: containers %v and volumes %v; want only the target's claim and its two volumes", cs, vs)
	}
	if held, err := e.p.Housekeep(ctx); err != nil || held != 1 {
		t.Fatalf("Housekeep = %d, %v; want the claim held (its engine runs)", held, err)
	}
}
