package docker_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
)

// The checkpoint operations against the Docker API fixture, where faults
// can be injected at every native call: the exact calls of a clean
// Suspend, and what each failure leaves and how it is recovered.

// checkpointFixture is a fixture harness with one running Session.
type checkpointFixture struct {
	p     *docker.Provider
	srv   *dockertest.Server
	ref   sandbox.Reference
	first sandbox.Compute
	id    string // the first incarnation's container id
}

func newCheckpointFixture(t *testing.T) *checkpointFixture {
	t.Helper()
	h := newFixtureHarness(t)
	f := &checkpointFixture{p: h.Provider.(*docker.Provider), srv: h.Native.(*dockertest.Native).Server, ref: contracttest.NewReference()}
	info, err := f.p.Create(context.Background(), contracttest.CreateRequest(f.ref, resources))
	if err != nil {
		t.Fatal(err)
	}
	f.id = info.ProviderID
	f.first, _ = f.p.Initial(f.ref)
	f.srv.ResetCalls()
	return f
}

// mutations lists the mutating calls since the last ResetCalls.
func (f *checkpointFixture) mutations() []string {
	var out []string
	for _, c := range f.srv.Calls() {
		if c.Mutating {
			out = append(out, c.Name)
		}
	}
	return out
}

func (f *checkpointFixture) state(name string) string {
	c, ok := f.srv.Container(name)
	if !ok {
		return "absent"
	}
	return c.State
}

// TestFixtureSuspendCalls: the exact calls of a clean Suspend, and of
// Resume, DeleteSnapshot and KillCompute after it.
func TestFixtureSuspendCalls(t *testing.T) {
	f := newCheckpointFixture(t)
	ctx := context.Background()
	res, err := f.p.Suspend(ctx, sandbox.SuspendRequest{Compute: f.first, OperationID: uuid.NewString()})
	if err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	const (
		ci, cc, cr, cp = dockertest.CallContainerInspect, dockertest.CallContainerCreate, dockertest.CallContainerRemove, dockertest.CallContainerPause
		vi, vr         = dockertest.CallVolumeInspect, dockertest.CallVolumeRemove
		ar, aw         = dockertest.CallArchiveRead, dockertest.CallContainerArchive
	)
	want := []string{
		ci, ci, ci, vi, vi, // holder, capture, source, the snapshot's volume names
		cp, cc, ar, aw, ar, aw, // pause, capture container, /home and /environment
		cc, ci, // holder, confirmed
		ci, ci, cr, // finish: source, capture container removed
		vi, vi, cr, ci, vr, vr, vi, vi, // the source and its volumes removed, confirmed
	}
	if got := f.srv.CallNames(); !slices.Equal(got, want) {
		t.Fatalf("Suspend calls:\n got %v\nwant %v", got, want)
	}
	if f.state(f.id) != "absent" || f.state(res.Snapshot.ID) != dockertest.StateCreated || f.state(res.Snapshot.ID+"-capture") != "absent" {
		t.Fatalf("after Suspend: source %s, holder %s, capture %s", f.state(f.id), f.state(res.Snapshot.ID), f.state(res.Snapshot.ID+"-capture"))
	}
	// The snapshot holds what the source's volumes held: Create's
	// bootstrap file and environment directories.
	v, ok := f.srv.Volume(res.Snapshot.ID + "-home")
	if !ok || v.Labels[docker.LabelSnapshotOperation] == "" {
		t.Fatalf("snapshot home volume %+v", v)
	}
	second, _ := f.p.NewCompute(f.first)
	f.srv.ResetCalls()
	ca := selfSignedPEM(t)
	resumed, err := f.p.Resume(ctx, sandbox.ResumeRequest{Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(),
		Resources: resources, Bootstrap: contracttest.CreateRequest(f.ref, resources).Bootstrap, CoreCA: ca})
	if err != nil || resumed.Compute.State != sandbox.ComputeRunning {
		t.Fatalf("Resume: %+v, %v", resumed, err)
	}
	want = []string{
		ci,         // holder
		ci, vi, vi, // the target's names free
		dockertest.CallVolumeCreate, dockertest.CallVolumeCreate, cc, ci, // volumes, container, limits checked
		ar, aw, ar, aw, // the snapshot copied in
		aw, dockertest.CallContainerStart, // fresh bootstrap, start
	}
	if got := f.srv.CallNames(); !slices.Equal(got, want) {
		t.Fatalf("Resume calls:\n got %v\nwant %v", got, want)
	}
	// The last archive written is the fresh bootstrap (/home/runtime, its
	// file and the CA beside it), after the snapshot's.
	archives := f.srv.Archives(resumed.Compute.Compute.ID)
	if last := archives[len(archives)-1]; last.Path != docker.HomeMount || len(last.Entries) != 3 ||
		!strings.HasSuffix(last.Entries[1].Header.Name, "runtime-bootstrap.json") ||
		last.Entries[2].Header.Name != "runtime/core-ca.pem" || last.Entries[2].Header.Mode != 0o644 ||
		!bytes.Equal(last.Entries[2].Content, ca) {
		t.Fatalf("the last archive written is %+v, want the fresh bootstrap and the CA", last.Path)
	}
	if err := f.p.DeleteSnapshot(ctx, f.ref, res.Snapshot); err != nil {
		t.Fatal(err)
	}
	if err := f.p.KillCompute(ctx, resumed.Compute.Compute); err != nil {
		t.Fatal(err)
	}
	if cs := f.srv.Containers(); len(cs) != 0 {
		t.Fatalf("containers left: %+v", cs)
	}
	if vs := f.srv.Volumes(); len(vs) != 0 {
		t.Fatalf("volumes left: %+v", vs)
	}
}

// TestFixtureSuspendLostDuringCapture: the capture's archive read is lost.
// The outcome is unknown; the source stays paused, never removed; the same
// operation again (refused) and ObserveOnly (no complete snapshot) never
// copy again; ResumeCompute thaws
// the same source; DeleteSnapshot removes the partial snapshot.
func TestFixtureSuspendLostDuringCapture(t *testing.T) {
	f := newCheckpointFixture(t)
	ctx := context.Background()
	op := uuid.NewString()
	f.srv.Arm(dockertest.CallArchiveRead, dockertest.FaultDrop, nil)
	if _, err := f.p.Suspend(ctx, sandbox.SuspendRequest{Compute: f.first, OperationID: op}); !errors.Is(err, errdefs.ErrComputeUnconfirmed) {
		t.Fatalf("Suspend = %v; want ErrComputeUnconfirmed", err)
	}
	if f.state(f.id) != dockertest.StatePaused {
		t.Fatalf("source %s after the lost capture, want paused", f.state(f.id))
	}
	for _, observe := range []bool{false, true} {
		// Suspend again refuses the attempt of unknown outcome; ObserveOnly
		// answers that the operation has no complete snapshot.
		want := errdefs.ErrComputeUnconfirmed
		if observe {
			want = errdefs.ErrNotFound
		}
		f.srv.ResetCalls()
		if _, err := f.p.Suspend(ctx, sandbox.SuspendRequest{Compute: f.first, OperationID: op, ObserveOnly: observe}); !errors.Is(err, want) {
			t.Fatalf("Suspend again (observe only %v) = %v; want %v", observe, err, want)
		}
		if m := f.mutations(); len(m) != 0 {
			t.Fatalf("Suspend again (observe only %v) mutated: %v", observe, m)
		}
	}
	f.srv.ResetCalls()
	got, err := f.p.ResumeCompute(ctx, f.first)
	if err != nil || got.State != sandbox.ComputeRunning || got.Compute.ID != f.id {
		t.Fatalf("ResumeCompute = %+v, %v", got, err)
	}
	if m := f.mutations(); !slices.Equal(m, []string{dockertest.CallContainerUnpause}) {
		t.Fatalf("ResumeCompute mutated %v, want one unpause", m)
	}
	name := f.p.SnapshotName(f.ref, op)
	if err := f.p.DeleteSnapshot(ctx, f.ref, sandbox.SnapshotIdentity{ID: name}); err != nil {
		t.Fatalf("DeleteSnapshot of the partial snapshot: %v", err)
	}
	if f.state(name+"-capture") != "absent" {
		t.Fatal("the capture container is left")
	}
	for _, v := range []string{name + "-home", name + "-environment"} {
		if _, ok := f.srv.Volume(v); ok {
			t.Fatalf("snapshot volume %s left", v)
		}
	}
	if f.state(f.id) != dockertest.StateRunning {
		t.Fatalf("source %s, want running", f.state(f.id))
	}
}

// TestFixtureSuspendAnswerLostAfterTheHolder: the holder's create is
// performed but its answer lost. ObserveOnly finds the complete snapshot
// with the source still paused; the same operation again only finishes
// (no archive read, no capture container, no holder created again).
func TestFixtureSuspendAnswerLostAfterTheHolder(t *testing.T) {
	f := newCheckpointFixture(t)
	op := uuid.NewString()
	ctx, cancel := context.WithCancel(context.Background())
	creates := 0
	// The second container create of the Suspend is the holder's.
	f.srv.Arm(dockertest.CallContainerCreate, dockertest.FaultHookAfterDispatch, func() {
		creates++
		f.srv.Arm(dockertest.CallContainerCreate, dockertest.FaultCancelAfterDispatch, cancel)
	})
	if _, err := f.p.Suspend(ctx, sandbox.SuspendRequest{Compute: f.first, OperationID: op}); err == nil || creates != 1 {
		t.Fatalf("Suspend with the holder's answer lost = %v (%d capture creates)", err, creates)
	}
	bg := context.Background()
	f.srv.ResetCalls()
	observed, err := f.p.Suspend(bg, sandbox.SuspendRequest{Compute: f.first, OperationID: op, ObserveOnly: true})
	if err != nil || observed.Snapshot.ID != f.p.SnapshotName(f.ref, op) || observed.Source.State != sandbox.ComputePaused {
		t.Fatalf("ObserveOnly = %+v, %v; want the snapshot with the source paused", observed, err)
	}
	if m := f.mutations(); len(m) != 0 {
		t.Fatalf("ObserveOnly mutated %v", m)
	}
	f.srv.ResetCalls()
	done, err := f.p.Suspend(bg, sandbox.SuspendRequest{Compute: f.first, OperationID: op})
	if err != nil || done.Snapshot != observed.Snapshot || done.Source.State != sandbox.ComputeAbsent {
		t.Fatalf("Suspend again = %+v, %v", done, err)
	}
	for _, c := range f.srv.CallNames() {
		if c == dockertest.CallArchiveRead || c == dockertest.CallContainerCreate || c == dockertest.CallContainerPause {
			t.Fatalf("Suspend again captured again: %v", f.srv.CallNames())
		}
	}
	if f.state(f.id) != "absent" {
		t.Fatal("the source is left")
	}
}

// TestFixtureResumeLostAtStart: the Runtime's start is lost. ObserveOnly
// reports the target created, not running; KillCompute removes exactly
// it; the snapshot stays.
func TestFixtureResumeLostAtStart(t *testing.T) {
	f := newCheckpointFixture(t)
	ctx := context.Background()
	res, err := f.p.Suspend(ctx, sandbox.SuspendRequest{Compute: f.first, OperationID: uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	second, _ := f.p.NewCompute(f.first)
	req := sandbox.ResumeRequest{Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(),
		Resources: resources, Bootstrap: contracttest.CreateRequest(f.ref, resources).Bootstrap}
	f.srv.Arm(dockertest.CallContainerStart, dockertest.FaultDrop, nil)
	if _, err := f.p.Resume(ctx, req); !errors.Is(err, errdefs.ErrComputeUnconfirmed) {
		t.Fatalf("Resume = %v; want ErrComputeUnconfirmed", err)
	}
	f.srv.ResetCalls()
	req.ObserveOnly = true
	observed, err := f.p.Resume(ctx, req)
	if err != nil || observed.Compute.State != sandbox.ComputeStopped || observed.Compute.Compute.ID == "" {
		t.Fatalf("Resume ObserveOnly = %+v, %v; want the created target", observed, err)
	}
	if m := f.mutations(); len(m) != 0 {
		t.Fatalf("ObserveOnly mutated %v", m)
	}
	if err := f.p.KillCompute(ctx, observed.Compute.Compute); err != nil {
		t.Fatal(err)
	}
	if f.state(second.Name) != "absent" || f.state(res.Snapshot.ID) != dockertest.StateCreated {
		t.Fatalf("after KillCompute: target %s, holder %s", f.state(second.Name), f.state(res.Snapshot.ID))
	}
}

// TestFixtureForeignAndExactIncarnations: a foreign container under the
// snapshot's name stops Resume and DeleteSnapshot before any mutation;
// KillCompute of an incarnation whose name another container of the same
// generation now holds touches nothing; ResumeCompute never starts a
// stopped source.
func TestFixtureForeignAndExactIncarnations(t *testing.T) {
	f := newCheckpointFixture(t)
	ctx := context.Background()
	name := f.p.SnapshotName(f.ref, uuid.NewString())
	f.srv.PutContainer(name, map[string]string{"io.example.owner": "someone"}, dockertest.StateCreated)
	f.srv.ResetCalls()
	second, _ := f.p.NewCompute(f.first)
	if _, err := f.p.Resume(ctx, sandbox.ResumeRequest{Snapshot: sandbox.SnapshotIdentity{ID: name}, Target: second, OperationID: uuid.NewString(),
		Resources: resources, Bootstrap: contracttest.CreateRequest(f.ref, resources).Bootstrap}); !errors.Is(err, errdefs.ErrOwnership) {
		t.Fatalf("Resume from a foreign holder = %v; want ErrOwnership", err)
	}
	if err := f.p.DeleteSnapshot(ctx, f.ref, sandbox.SnapshotIdentity{ID: name}); !errors.Is(err, errdefs.ErrOwnership) {
		t.Fatalf("DeleteSnapshot of a foreign holder = %v; want ErrOwnership", err)
	}
	if m := f.mutations(); len(m) != 0 {
		t.Fatalf("mutated %v", m)
	}

	other := f.first
	other.ID = strings.Repeat("f", 64)
	f.srv.ResetCalls()
	if err := f.p.KillCompute(ctx, other); err != nil {
		t.Fatalf("KillCompute of a gone incarnation = %v", err)
	}
	if m := f.mutations(); len(m) != 0 || f.state(f.id) != dockertest.StateRunning {
		t.Fatalf("KillCompute of another id mutated %v (source %s)", m, f.state(f.id))
	}

	f.srv.SetContainerState(f.id, dockertest.StateExited)
	f.srv.ResetCalls()
	if _, err := f.p.ResumeCompute(ctx, f.first); !errors.Is(err, errdefs.ErrRuntimeNotRunning) {
		t.Fatalf("ResumeCompute of a stopped source = %v; want ErrRuntimeNotRunning", err)
	}
	if m := f.mutations(); len(m) != 0 || f.state(f.id) != dockertest.StateExited {
		t.Fatalf("ResumeCompute of a stopped source mutated %v (%s)", m, f.state(f.id))
	}
}

// TestFixtureKillBesideAForeignFirstName: issue 26's item 1 against the
// fixture (TestAcceptanceKillBesideAForeignFirstName is the same on a
// real engine). A foreign container under the first incarnation's name
// after a suspension and a resume: Kill removes the second incarnation
// and the snapshot and never touches the foreign container.
func TestFixtureKillBesideAForeignFirstName(t *testing.T) {
	f := newCheckpointFixture(t)
	ctx := context.Background()
	res, err := f.p.Suspend(ctx, sandbox.SuspendRequest{Compute: f.first, OperationID: uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	second, _ := f.p.NewCompute(f.first)
	if _, err := f.p.Resume(ctx, sandbox.ResumeRequest{Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(),
		Resources: resources, Bootstrap: contracttest.CreateRequest(f.ref, resources).Bootstrap}); err != nil {
		t.Fatal(err)
	}
	f.srv.PutContainer(f.p.Name(f.ref), map[string]string{"io.example.owner": "someone"}, dockertest.StateRunning)
	if err := f.p.Kill(ctx, sandbox.KillRequest{Reference: f.ref}); err != nil {
		t.Fatalf("Kill = %v", err)
	}
	if f.state(second.Name) != "absent" || f.state(res.Snapshot.ID) != "absent" {
		t.Fatalf("after Kill: second incarnation %s, snapshot holder %s; want both absent", f.state(second.Name), f.state(res.Snapshot.ID))
	}
	if f.state(f.p.Name(f.ref)) != dockertest.StateRunning {
		t.Fatalf("the foreign container is %s", f.state(f.p.Name(f.ref)))
	}
	for _, v := range f.srv.Volumes() {
		if v.Labels[docker.LabelAllocation] == f.ref.AllocationID {
			t.Fatalf("Kill left volume %s", v.Name)
		}
	}
}

// selfSignedPEM returns a fresh self-signed certificate in PEM: the CA a
// Resume hands the Runtime only has to be a certificate.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "checkpoint fixture CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
