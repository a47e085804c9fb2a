package chaos

import (
	"context"
	"crypto/tls"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox/docker"

	"berth.dev/core/store/storetest"

	"berth.dev/test/internal/stack"
)

// TestAdminRefusesMissingOrWrongTokens: every admin service refuses a call
// without the operator's token, with a wrong one, a truncated one or
// another scheme, with Unauthenticated and without echoing what was
// presented; the right token is accepted.
func TestAdminRefusesMissingOrWrongTokens(t *testing.T) {
	core := stack.StartCore(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true)
	cc, good := core.AdminClient(t)
	token := core.AdminToken(t)
	addSecret(token)
	t.Cleanup(func() {
		addLogs(core.Logs())
		for _, f := range leaks([]string{core.Logs()}) {
			t.Errorf("a secret reached Core's log: %s", f)
		}
	})
	calls := map[string]func(context.Context) error{
		"GetInstallation": func(ctx context.Context) error {
			_, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
			return err
		},
		"ListNodes": func(ctx context.Context) error {
			_, err := adminv1.NewNodeServiceClient(cc).ListNodes(ctx, &adminv1.ListNodesRequest{})
			return err
		},
		"CreateEnrollmentToken": func(ctx context.Context) error {
			_, err := adminv1.NewNodeServiceClient(cc).CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: "7d1f3b0e-8a9c-4e2b-9f6d-0c5a4b3e2d1f"})
			return err
		},
		"ListSessions": func(ctx context.Context) error {
			_, err := adminv1.NewSessionServiceClient(cc).ListSessions(ctx, &adminv1.ListSessionsRequest{})
			return err
		},
		"GetDeployment": func(ctx context.Context) error {
			_, err := adminv1.NewDeploymentServiceClient(cc).GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
			return err
		},
	}
	presented := map[string]context.Context{
		"no token":       context.Background(),
		"wrong token":    withAuth("Bearer " + strings.Repeat("x", len(token))),
		"truncated":      withAuth("Bearer " + token[:len(token)-1]),
		"another scheme": withAuth("Basic " + token),
		"bare token":     withAuth(token),
		"empty bearer":   withAuth("Bearer "),
	}
	for what, ctx := range presented {
		for name, call := range calls {
			err := call(ctx)
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s with %s: %v; want Unauthenticated", name, what, err)
			}
			if err != nil && strings.Contains(err.Error(), token[:len(token)-1]) {
				t.Errorf("%s with %s: the refusal echoes the token", name, what)
			}
		}
	}
	if err := calls["GetInstallation"](good); err != nil {
		t.Fatalf("the right token: %v", err)
	}
}

func withAuth(value string) context.Context {
	return metadata.NewOutgoingContext(context.Background(), metadata.Pairs("authorization", value))
}

// TestNodeAgentRefusesPlaintextAndUnknownCertificates dials an enrolled,
// connected node agent as an attacker would: in plaintext, over TLS without
// a client certificate, and with a Core certificate of another
// installation. Each Hello fails in the TLS handshake (UNAVAILABLE with no
// node-protocol ErrorInfo: the service never saw the call), while Core
// (with the genuine certificate) stays connected.
func TestNodeAgentRefusesPlaintextAndUnknownCertificates(t *testing.T) {
	r := &run{}
	c := newCluster(t, r, options{proxied: -1, nodes: 1})
	n := c.nodes[0]
	other := stack.NewInstallation(t)
	attempts := map[string]grpc.DialOption{
		"plaintext": grpc.WithTransportCredentials(insecure.NewCredentials()),
		"TLS without a client certificate": grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, // the node's verification is under test
		})),
		"another installation's Core certificate": grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{other.CoreCert},
		})),
	}
	for what, opt := range attempts {
		cc, err := grpc.NewClient(n.Addr, opt)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// The raw client: the handshake's status, not Core's mapping of it.
		_, err = pb.NewNodeServiceClient(cc).Hello(ctx, &pb.HelloRequest{})
		if st := status.Convert(err); err == nil || st.Code() != codes.Unavailable || len(st.Details()) != 0 {
			t.Errorf("%s: Hello answered %v, want UNAVAILABLE from the handshake with no details", what, err)
		}
		cancel()
		_ = cc.Close()
	}
	c.waitConnected(n, true)
}

// TestContainersAreHardened creates Sessions through Core and inspects
// their containers on the engine for the guide's Docker settings: user
// 1000:1000, read-only root, every capability dropped, no-new-privileges,
// the seccomp profile, AppArmor unconfined, the node's network, the
// deployment's CPU and memory, 128 processes, a 128 MiB /tmp, exactly the
// two labelled volumes (no bind mount, so no Docker socket or host path),
// not privileged, and no credential in the environment. Their device
// credentials join the secrets the log scan looks for.
func TestContainersAreHardened(t *testing.T) {
	r := &run{}
	c := newCluster(t, r, options{proxied: -1})
	names := c.mustCreate(3)
	if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != len(names) {
		t.Fatalf("only %d of %d Sessions ACTIVE", len(got), len(names))
	}
	if got := c.credentials(); got != len(names) {
		t.Errorf("read %d device credentials from %d containers", got, len(names))
	}
	ctx := context.Background()
	list, err := c.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: stack.InstallationFilter(c.inst)})
	if err != nil || len(list.Items) != len(names) {
		t.Fatalf("containers: %d, %v", len(list.Items), err)
	}
	s := spec(8)
	for _, item := range list.Items {
		res, err := c.cli.ContainerInspect(ctx, item.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ct := res.Container
		hc, cfg := ct.HostConfig, ct.Config
		check := func(what string, ok bool) {
			if !ok {
				t.Errorf("container %s: %s (inspect: host config %+v)", ct.Name, what, hc)
			}
		}
		check("runs as 1000:1000", cfg.User == docker.RuntimeUser)
		check("read-only root filesystem", hc.ReadonlyRootfs)
		check("drops every capability", slices.Equal(hc.CapDrop, []string{"ALL"}) && len(hc.CapAdd) == 0)
		check("not privileged", !hc.Privileged)
		check("no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges:true"))
		check("AppArmor unconfined", slices.Contains(hc.SecurityOpt, "apparmor=unconfined"))
		check("the seccomp profile", slices.ContainsFunc(hc.SecurityOpt, func(o string) bool {
			return strings.HasPrefix(o, "seccomp=") && strings.Contains(o, `"defaultAction"`)
		}))
		check("the node's network (none)", string(hc.NetworkMode) == "none")
		check("the deployment's CPU", hc.NanoCPUs == int64(s.GetCpuMillis())*1_000_000)
		check("the deployment's memory, no swap beyond it", hc.Memory == s.GetMemoryBytes() && hc.MemorySwap == s.GetMemoryBytes())
		check("128 processes", hc.PidsLimit != nil && *hc.PidsLimit == docker.PidsLimit)
		check("a 128 MiB /tmp tmpfs", hc.Tmpfs["/tmp"] == docker.TmpfsOptions)
		check("no bind mounts", len(hc.Binds) == 0)
		var targets []string
		for _, m := range ct.Mounts {
			check("only volume mounts", m.Type == mount.TypeVolume)
			targets = append(targets, m.Destination)
		}
		slices.Sort(targets)
		check("mounts /environment, /home and /workspace", slices.Equal(targets, []string{docker.EnvironmentPath, docker.HomeMount, docker.WorkspacePath}))
		check("labelled with the installation", cfg.Labels[docker.LabelInstallation] == c.inst && cfg.Labels[docker.LabelAllocation] != "")
		check("the runtime command", slices.Equal(cfg.Cmd, docker.RuntimeCommand()))
		for _, e := range cfg.Env {
			for _, secret := range knownSecrets() {
				check("no secret in the environment", !strings.Contains(e, secret))
			}
		}
	}
	c.invariants()
}

func knownSecrets() []string {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	return slices.Clone(secrets)
}

// TestInvariantChecksDetectViolations proves the checks can fail: a
// container created again under an allocation's name after cleanup (a
// replayed Create) trips I1 and I2, an unlabelled volume under an
// allocation's derived name trips I2 by the engine's event log, and a
// removed foreign volume trips I3.
func TestInvariantChecksDetectViolations(t *testing.T) {
	c, _ := selfTestCluster(t, options{proxied: -1, nodes: 1})
	ctx := context.Background()
	list, err := c.cli.ContainerList(ctx, client.ContainerListOptions{Filters: stack.InstallationFilter(c.inst)})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("containers: %v %v", list.Items, err)
	}
	inspected, err := c.cli.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.deleteAll()
	c.settle()
	// A rogue replay: the same name and labels, created again.
	if _, err := c.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: strings.TrimPrefix(inspected.Container.Name, "/"), Config: containerConfig(c.image, inspected.Container.Config.Labels),
	}); err != nil {
		t.Fatal(err)
	}
	// A volume under the allocation's derived name without any label:
	// found by name from the event log, not by label.
	unlabelled := strings.TrimPrefix(inspected.Container.Name, "/") + "-home"
	if _, err := c.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: unlabelled}); err != nil {
		t.Fatal(err)
	}
	_, _ = c.cli.VolumeRemove(ctx, c.foreign[0].volumes[0], client.VolumeRemoveOptions{Force: true})
	var got []string
	c.captured = &got
	c.checkCreates()
	c.checkEngineLeaks()
	c.checkForeign()
	if containers, _ := stack.Owned(t, c.cli, c.inst); containers != 1 {
		t.Errorf("the rogue container is not counted under the installation: %d", containers)
	}
	c.captured = nil
	stack.RemoveOwned(t, c.cli, c.inst)
	_, _ = c.cli.VolumeRemove(ctx, unlabelled, client.VolumeRemoveOptions{Force: true})
	joined := strings.Join(got, "\n")
	for _, want := range []string{"I1: allocation", "I2: container", "I2: volume " + unlabelled, "I3: foreign volume"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the checks missed %q; they reported:\n%s", want, joined)
		}
	}
}
