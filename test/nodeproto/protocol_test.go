package nodeproto

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"berth.dev/platform/nodetls"
	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"

	"berth.dev/core/nodes"

	"berth.dev/test/internal/stack"
)

// adapterCalls are the fixture calls an operation would make; the probe's
// own reads (ping, version, info, image inspect) are not among them.
func adapterCalls(engine *dockertest.Server) []string {
	return contractNames(dockertest.NewNative(engine, "").Calls())
}

func contractNames(calls []contracttest.NativeCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Name
	}
	return out
}

func md(version, conn string, epoch, generation uint64) metadata.MD {
	return metadata.Pairs(
		pb.MetadataProtocolVersion, version,
		pb.MetadataConnectionID, conn,
		pb.MetadataOwnerEpoch, strconv.FormatUint(epoch, 10),
		pb.MetadataGeneration, strconv.FormatUint(generation, 10),
	)
}

func wireCode(t *testing.T, err error) nodewire.Code {
	t.Helper()
	var we *nodewire.Error
	if !errors.As(nodewire.FromError(sandbox.OpGetInfo, err), &we) {
		t.Fatalf("not a protocol error: %v", err)
	}
	return we.Code
}

// TestProtocolRejectsBeforeTheAdapter sends calls with a wrong version, a
// stale owner epoch, a superseded or unknown connection id and another
// generation: each is rejected with its fixed code and the adapter (the
// engine fixture) sees nothing.
func TestProtocolRejectsBeforeTheAdapter(t *testing.T) {
	_, engine, n := startFixtureNode(t)
	cc := n.Dial(t)
	client := pb.NewNodeServiceClient(cc)
	conn, proxy := n.Connect(t, cc, 5)
	ref := contracttest.NewReference()
	ctx := context.Background()
	if _, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources)); err != nil {
		t.Fatalf("create: %v", err)
	}
	engine.ResetCalls()

	get := &pb.GetInfoRequest{Reference: nodewire.ReferenceToWire(ref)}
	cases := []struct {
		name string
		md   metadata.MD
		want nodewire.Code
	}{
		{"older protocol version", md("berth.sandboxnode.v1/1", conn.ConnectionID, 5, 1), nodewire.CodeProtocolMismatch},
		{"no version", metadata.Pairs(pb.MetadataConnectionID, conn.ConnectionID), nodewire.CodeProtocolMismatch},
		{"stale owner epoch", md(pb.ProtocolVersion, conn.ConnectionID, 4, 1), nodewire.CodeFenced},
		{"unknown connection", md(pb.ProtocolVersion, uuid.NewString(), 5, 1), nodewire.CodeFenced},
		{"other generation", md(pb.ProtocolVersion, conn.ConnectionID, 5, 2), nodewire.CodeFenced},
		{"malformed epoch", metadata.Pairs(pb.MetadataProtocolVersion, pb.ProtocolVersion, pb.MetadataConnectionID, conn.ConnectionID,
			pb.MetadataOwnerEpoch, "five", pb.MetadataGeneration, "1"), nodewire.CodeInvalid},
	}
	for _, c := range cases {
		_, err := client.GetInfo(metadata.NewOutgoingContext(ctx, c.md), get)
		if got := wireCode(t, err); got != c.want {
			t.Errorf("%s: code %q, want %q", c.name, got, c.want)
		}
		_, err = client.Kill(metadata.NewOutgoingContext(ctx, c.md), &pb.KillRequest{Reference: get.Reference})
		if got := wireCode(t, err); got != c.want {
			t.Errorf("%s (Kill): code %q, want %q", c.name, got, c.want)
		}
	}
	// A Connect below the highest epoch is refused too.
	stream, err := client.Connect(metadata.NewOutgoingContext(ctx, md(pb.ProtocolVersion, uuid.NewString(), 4, 1)), &pb.ConnectRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if got := wireCode(t, err); got != nodewire.CodeFenced {
		t.Errorf("stale Connect: code %q", got)
	}
	if calls := adapterCalls(engine); len(calls) != 0 {
		t.Fatalf("rejected calls reached the adapter: %v", calls)
	}
	// The legitimate connection still works.
	if _, err := proxy.GetInfo(ctx, ref); err != nil {
		t.Fatalf("current connection: %v", err)
	}
}

// TestReconnectFencesTheOldConnection: a new connection (new id) supersedes
// the old one on the node, and a new owner epoch fences every older owner,
// also across a node restart.
func TestReconnectFencesTheOldConnection(t *testing.T) {
	_, engine, n := startFixtureNode(t)
	cc := n.Dial(t)
	_, oldProxy := n.Connect(t, cc, 1)
	ref := contracttest.NewReference()
	ctx := context.Background()
	if _, err := oldProxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources)); err != nil {
		t.Fatal(err)
	}
	_, newProxy := n.Connect(t, cc, 1)
	engine.ResetCalls()
	if _, err := oldProxy.GetInfo(ctx, ref); !errdefs.IsFenced(err) {
		t.Fatalf("superseded connection: %v", err)
	}
	if calls := adapterCalls(engine); len(calls) != 0 {
		t.Fatalf("fenced call reached the adapter: %v", calls)
	}
	if _, err := newProxy.GetInfo(ctx, ref); err != nil {
		t.Fatalf("new connection: %v", err)
	}

	// A new owner (epoch 2) takes over; the node persists the epoch, so
	// after a restart the old owner still cannot connect.
	n.Connect(t, cc, 2)
	n.Stop()
	n.Start()
	cc2 := n.Dial(t)
	client := pb.NewNodeServiceClient(cc2)
	if _, err := nodes.Open(ctx, client, 1); !errdefs.IsFenced(err) {
		t.Fatalf("old owner after restart: %v", err)
	}
	_, proxy := n.Connect(t, cc2, 2)
	info, err := proxy.GetInfo(ctx, ref)
	if err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("allocation after restart: %+v, %v", info, err)
	}
}

// TestCertificatesAreChecked: Core's client certificate must come from the
// installation CA and name its Core; the node must be exactly the node
// Core expects; plaintext is refused. None of it reaches the adapter.
func TestCertificatesAreChecked(t *testing.T) {
	inst, engine, n := startFixtureNode(t)
	engine.ResetCalls()

	// hello says Hello as Core does (core) or with the raw client, whose
	// error is the handshake's own status rather than Core's mapping of it.
	hello := func(creds credentials.TransportCredentials, core bool) error {
		cc, err := grpc.NewClient(n.Addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if core {
			_, _, err = nodes.Hello(ctx, pb.NewNodeServiceClient(cc))
		} else {
			_, err = pb.NewNodeServiceClient(cc).Hello(ctx, &pb.HelloRequest{})
		}
		return err
	}
	other := stack.NewInstallation(t)
	foreignCore, err := nodetls.ClientConfig(other.CoreCert, other.CA.Certificate(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Another installation's Core, trusting our CA for the server side but
	// presenting its own client certificate.
	foreignCore.RootCAs = nil
	mixed, err := nodetls.ClientConfig(inst.CoreCert, inst.CA.Certificate(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	mixed.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &other.CoreCert, nil }
	wrongNode, err := nodetls.ClientConfig(inst.CoreCert, inst.CA.Certificate(), uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":                        insecure.NewCredentials(),
		"client certificate of another CA": credentials.NewTLS(mixed),
		"another installation altogether":  credentials.NewTLS(foreignCore),
		"node presenting another identity": credentials.NewTLS(wrongNode),
	} {
		// Refused in the handshake: UNAVAILABLE, and no node-protocol
		// details, because the service never saw the call.
		if st := status.Convert(hello(creds, false)); st.Code() != codes.Unavailable || len(st.Details()) != 0 {
			t.Errorf("%s: %v, want UNAVAILABLE from the handshake with no details", name, st)
		}
	}
	good, err := nodetls.ClientConfig(inst.CoreCert, inst.CA.Certificate(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := hello(credentials.NewTLS(good), true); err != nil {
		t.Fatalf("Core with the right certificate: %v", err)
	}
	if calls := adapterCalls(engine); len(calls) != 0 {
		t.Fatalf("refused peers reached the adapter: %v", calls)
	}
}

// TestMalformedCheckpointsAnsweredBeforeTheAdapter: the Docker backend
// supports checkpoints, and the node answers each checkpoint RPC it cannot
// decode (every required field missing) with the typed invalid-argument
// code, without touching the adapter.
func TestMalformedCheckpointsAnsweredBeforeTheAdapter(t *testing.T) {
	_, engine, n := startFixtureNode(t)
	cc := n.Dial(t)
	conn, _ := n.Connect(t, cc, 1)
	client := pb.NewNodeServiceClient(cc)
	ctx := metadata.NewOutgoingContext(context.Background(), md(pb.ProtocolVersion, conn.ConnectionID, 1, 1))
	engine.ResetCalls()
	calls := map[string]func() error{
		"Suspend":        func() error { _, err := client.Suspend(ctx, &pb.SuspendRequest{}); return err },
		"Capture":        func() error { _, err := client.Capture(ctx, &pb.CaptureRequest{}); return err },
		"Resume":         func() error { _, err := client.Resume(ctx, &pb.ResumeRequest{}); return err },
		"GetCompute":     func() error { _, err := client.GetCompute(ctx, &pb.GetComputeRequest{}); return err },
		"KillCompute":    func() error { _, err := client.KillCompute(ctx, &pb.KillComputeRequest{}); return err },
		"DeleteSnapshot": func() error { _, err := client.DeleteSnapshot(ctx, &pb.DeleteSnapshotRequest{}); return err },
		"RunCommandCompute": func() error {
			_, err := client.RunCommandCompute(ctx, &pb.RunCommandComputeRequest{})
			return err
		},
	}
	for name, call := range calls {
		err := nodewire.FromError(providercontractOp(name), call())
		if !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
	if got := adapterCalls(engine); len(got) != 0 {
		t.Fatalf("checkpoint calls reached the adapter: %v", got)
	}
}

// TestReadinessAndHealth: a node serves no generation until one is
// published; then Hello, ServeGenerations and health reports carry each
// served generation's status and probe result with a fixed diagnostic
// code, and the host's capacity. The deployment digest is the one Core
// computes (providers.DeploymentDigest).
func TestReadinessAndHealth(t *testing.T) {
	inst := stack.NewInstallation(t)
	engine := stack.FixtureEngine(t)
	n := stack.StartNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage, Generation: 3})
	cc := n.Dial(t)
	client := pb.NewNodeServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hello, _, err := nodes.Hello(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if len(hello.GetGenerations()) != 0 || hello.GetProviderKind() != "docker" {
		t.Fatalf("a node serves %v before any publication (kind %q)", hello.GetGenerations(), hello.GetProviderKind())
	}
	if c := hello.GetCapacity(); c.GetCpuMillis() < 1000 || c.GetMemoryBytes() == 0 || c.GetDiskFreeBytes() == 0 {
		t.Fatalf("capacity = %v", c)
	}
	conn, _ := n.Connect(t, cc, 1)
	st, err := conn.ServeGenerations(ctx, []nodewire.Generation{n.Published()})
	if err != nil || len(st) != 1 {
		t.Fatalf("serve: %v %v", st, err)
	}
	want := n.Published().DeploymentDigest
	if r := st[0].GetReadiness(); st[0].GetGeneration() != 3 || !r.GetReady() || r.GetGeneration() != 3 || r.GetDiagnosticCode() != "" ||
		st[0].GetBackendFingerprint() == "" || st[0].GetSpecificationDigest() == "" || st[0].GetDeploymentDigest() != want {
		t.Fatalf("status = %v, want ready generation 3 with digest %s", st[0], want)
	}
	if hello, _, err = nodes.Hello(ctx, client); err != nil || len(hello.GetGenerations()) != 1 || hello.GetGenerations()[0].GetGeneration() != 3 {
		t.Fatalf("hello after the publication: %v %v", hello.GetGenerations(), err)
	}

	// The engine lacks the pinned Image: the generation is not ready.
	n2 := stack.StartNode(t, inst, stack.NodeOptions{Socket: stack.FixtureEngine(t).Addr(), Image: "sha256:" + strings.Repeat("e", 64), Generation: 3})
	conn2, _ := n2.Connect(t, n2.Dial(t), 1)
	st, err = conn2.ServeGenerations(ctx, []nodewire.Generation{n2.Published()})
	if err != nil || len(st) != 1 || st[0].GetReadiness().GetReady() || st[0].GetReadiness().GetDiagnosticCode() != "image_missing" {
		t.Fatalf("status without the Image: %v %v", st, err)
	}
	report, _ := conn2.Last()
	if report.GetObservedAt() == nil || report.GetCapacity().GetMemoryBytes() == 0 {
		t.Fatalf("report = %v", report)
	}
}

// TestCallsAreRoutedByGeneration: a node serves exactly the published
// set; a call for a generation it does not serve is fenced before any
// adapter, each served generation has its own adapter (and state
// directory), and a generation left out is no longer served while the
// others' allocations stay reachable.
func TestCallsAreRoutedByGeneration(t *testing.T) {
	inst := stack.NewInstallation(t)
	engine := stack.FixtureEngine(t)
	n := stack.StartNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage, Generation: 1})
	conn, proxy := n.Connect(t, n.Dial(t), 1)
	ctx := context.Background()
	ref := contracttest.NewReference()
	if _, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources)); err != nil {
		t.Fatal(err)
	}
	// Generation 2 is not published yet: fenced, nothing reaches the engine.
	two := conn.Session
	two.Generation = 2
	proxy2, err := nodes.NewProxy(proxy.ProviderOperations(), func(context.Context) (*nodes.Session, error) { return &two, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine.ResetCalls()
	if _, err := proxy2.GetInfo(ctx, ref); !errdefs.IsFenced(err) {
		t.Fatalf("call for an unpublished generation: %v", err)
	}
	if calls := adapterCalls(engine); len(calls) != 0 {
		t.Fatalf("a call for an unpublished generation reached the adapter: %v", calls)
	}
	g2 := n.Published()
	g2.Number = 2
	g2.Specification.Resources.MemoryBytes *= 2
	g2.DeploymentDigest = providers.DeploymentDigest("docker", g2.Specification)
	st, err := conn.ServeGenerations(ctx, []nodewire.Generation{n.Published(), g2})
	if err != nil || len(st) != 2 || !st[0].GetReadiness().GetReady() || !st[1].GetReadiness().GetReady() {
		t.Fatalf("serve 1 and 2: %v %v", st, err)
	}
	if fi, err := os.Stat(filepath.Join(n.Dir, "state", "generations", "2")); err != nil || !fi.IsDir() {
		t.Fatalf("generation 2's state directory: %v", err)
	}
	ref2 := contracttest.NewReference()
	if _, err := proxy2.Create(ctx, contracttest.CreateRequest(ref2, stack.Resources)); err != nil {
		t.Fatalf("create on generation 2: %v", err)
	}
	// Generation 1 left out: its calls are fenced, generation 2's go on.
	if st, err = conn.ServeGenerations(ctx, []nodewire.Generation{g2}); err != nil || len(st) != 1 || st[0].GetGeneration() != 2 {
		t.Fatalf("serve 2: %v %v", st, err)
	}
	if _, err := proxy.GetInfo(ctx, ref); !errdefs.IsFenced(err) {
		t.Fatalf("call for a generation no longer served: %v", err)
	}
	if info, err := proxy2.GetInfo(ctx, ref2); err != nil || !info.IsSettledRunning(ref2) {
		t.Fatalf("generation 2's allocation: %+v %v", info, err)
	}
	// A malformed publication is refused with a field and changes nothing.
	bad := g2
	bad.DeploymentDigest = ""
	if _, err := conn.ServeGenerations(ctx, []nodewire.Generation{bad}); !errdefs.IsInvalid(err) {
		t.Fatalf("publication without a digest: %v", err)
	}
	if _, err := proxy2.GetInfo(ctx, ref2); err != nil {
		t.Fatalf("a refused publication changed the served set: %v", err)
	}
}
