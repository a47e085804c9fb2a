package stack

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
)

// FreeAddr returns a loopback address with a port free right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrOn(t, "127.0.0.1")
}

// FreeAddrOn is a free TCP address on host, for a listener another machine
// (a microVM, a container) must reach.
func FreeAddrOn(t testing.TB, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitFor polls ok every 250 ms until it holds; the test fails after d.
func WaitFor(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// WaitNode polls GetNode until ok holds for the node, within 20 s.
func WaitNode(t testing.TB, ctx context.Context, api adminv1.NodeServiceClient, name string, ok func(*adminv1.Node) bool) *adminv1.Node {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := api.GetNode(ctx, &adminv1.GetNodeRequest{Name: name})
		if err != nil {
			t.Fatalf("GetNode: %v", err)
		}
		if ok(resp.GetNode()) {
			return resp.GetNode()
		}
		if time.Now().After(deadline) {
			t.Fatalf("node never reached the expected state: %v", resp.GetNode())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Connected reports whether Core holds a connection to the node.
func Connected(n *adminv1.Node) bool { return n.GetPresence().GetConnected() }

// InstallationID asks the admin API for the installation's id.
func InstallationID(t testing.TB, ctx context.Context, cc *grpc.ClientConn) string {
	t.Helper()
	resp, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
	if err != nil {
		t.Fatalf("GetInstallation: %v", err)
	}
	Track(resp.GetInstallation().GetId())
	return resp.GetInstallation().GetId()
}

// CreateEnrollmentToken creates a 10-minute enrollment token through the
// admin API and returns its text.
func CreateEnrollmentToken(t testing.TB, ctx context.Context, cc *grpc.ClientConn) string {
	t.Helper()
	tok, err := adminv1.NewNodeServiceClient(cc).CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{
		RequestId: uuid.NewString(), Ttl: durationpb.New(10 * time.Minute),
	})
	if err != nil {
		t.Fatalf("CreateEnrollmentToken: %v", err)
	}
	return tok.GetTokenText()
}

// EnrollAndStart prepares a node over socket and image, enrolls it with a
// fresh token through Core's public address, advertising advertise (a free
// loopback address when empty) while it listens on listen (advertise when
// empty), and starts it. The test's cleanup stops it. The node is enrolled
// but not yet enabled.
func EnrollAndStart(t testing.TB, c *Core, ctx context.Context, cc *grpc.ClientConn, installationID string, o NodeOptions, advertise string) *Node {
	t.Helper()
	if o.Listen == "" {
		o.Listen = FreeAddr(t)
	}
	if advertise == "" {
		advertise = o.Listen
	}
	n := PrepareNode(t, &Installation{ID: installationID}, o)
	if out, code := EnrollCmd(t, n, c.PublicAddr(), CreateEnrollmentToken(t, ctx, cc), advertise); code != 0 {
		t.Fatalf("enroll: %d %s", code, out)
	}
	n.Start()
	t.Cleanup(n.Stop)
	return n
}

// EnableAll enables every enrolled node and waits until Core is connected
// to each; it returns the nodes' names in the order ListNodes gives.
func EnableAll(t testing.TB, ctx context.Context, cc *grpc.ClientConn) []string {
	t.Helper()
	api := adminv1.NewNodeServiceClient(cc)
	list, err := api.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: 100})
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	var names []string
	for _, n := range list.GetNodes() {
		names = append(names, n.GetName())
		if _, err := api.EnableNode(ctx, &adminv1.EnableNodeRequest{Name: n.GetName()}); err != nil {
			t.Fatalf("EnableNode: %v", err)
		}
	}
	for _, name := range names {
		WaitNode(t, ctx, api, name, Connected)
	}
	return names
}

// CommitDockerDeployment commits the initial Docker provider selection with
// spec through the admin API.
func CommitDockerDeployment(t testing.TB, ctx context.Context, cc *grpc.ClientConn, spec *adminv1.Specification) {
	t.Helper()
	resp, err := adminv1.NewDeploymentServiceClient(cc).CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "docker", Specification: spec,
	}})
	if err != nil {
		t.Fatalf("CommitDeployment: %v", err)
	}
	WaitPublished(t, ctx, cc, resp.GetDeployment().GetGeneration())
}

// WaitPublished waits (up to 60 s) until every enabled, connected node
// reports its readiness for generation, ready or not: Core published the
// generation to it and recorded the node's answer, so a placement right
// after sees the node as it serves that generation.
func WaitPublished(t testing.TB, ctx context.Context, cc *grpc.ClientConn, generation uint64) {
	t.Helper()
	api := adminv1.NewNodeServiceClient(cc)
	WaitFor(t, 60*time.Second, fmt.Sprintf("every connected node reporting generation %d", generation), func() bool {
		list, err := api.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: 100})
		if err != nil {
			return false
		}
		for _, n := range list.GetNodes() {
			if n.GetState() == adminv1.Node_STATE_ENABLED && Connected(n) && n.GetReadiness().GetGeneration() != generation {
				return false
			}
		}
		return true
	})
}

// InstallationFilter selects engine resources labelled with the
// installation.
func InstallationFilter(installationID string) client.Filters {
	return client.Filters{}.Add("label", docker.LabelInstallation+"="+installationID)
}

// Owned counts the containers (running or not) and volumes the engine
// holds under the installation's label, less the Docker adapter's
// tombstones (label io.berth.tombstone: a never-started container holding
// the name of an allocation whose Create never produced one, and its
// empty volumes), which the adapter keeps by design as the proof behind
// an absence receipt (sandbox/docker/doc.go).
func Owned(t testing.TB, cli *client.Client, installationID string) (containers, volumes int) {
	t.Helper()
	f := InstallationFilter(installationID)
	cs, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		if c.Labels[docker.LabelTombstone] == "" {
			containers++
		}
	}
	for _, v := range vs.Items {
		if v.Labels[docker.LabelTombstone] == "" {
			volumes++
		}
	}
	return containers, volumes
}

// RemoveOwned force-removes everything labelled with the installation and
// returns how many containers and volumes it found. The processes that
// made them are stopped first, but the engine may still be carrying out a
// request a stopped node agent sent (a Create it answers after the agent
// is gone): so it passes again, settlePause apart, until a pass after the
// first finds nothing (at most settlePasses passes; the suite's end, Run,
// reports what is left even then).
func RemoveOwned(t testing.TB, cli *client.Client, installationID string) (containers, volumes int) {
	t.Helper()
	for pass := range settlePasses {
		c, v := removeOwnedOnce(cli, installationID)
		containers, volumes = containers+c, volumes+v
		if c+v == 0 && pass > 0 {
			break
		}
		time.Sleep(settlePause)
	}
	return containers, volumes
}

// settlePasses and settlePause bound RemoveOwned's passes.
const (
	settlePasses = 10
	settlePause  = time.Second
)

// removeOwnedOnce is one pass of RemoveOwned.
func removeOwnedOnce(cli *client.Client, installationID string) (containers, volumes int) {
	f := InstallationFilter(installationID)
	cs, _ := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	vs, _ := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: f})
	for _, c := range cs.Items {
		_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	}
	for _, v := range vs.Items {
		_, _ = cli.VolumeRemove(context.Background(), v.Name, client.VolumeRemoveOptions{Force: true})
	}
	return len(cs.Items), len(vs.Items)
}

// AdminReason returns the google.rpc.ErrorInfo reason of an admin API
// error ("" when err carries none of the admin domain).
func AdminReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == adminv1.ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}
