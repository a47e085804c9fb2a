package projects

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// nodeCount is how many node agents the stack runs: two, so that the two
// projects' Sessions may land on different hosts' agents.
const nodeCount = 2

// env is one installation: berth-core with its Runtime gateway on the
// engine's bridge, nodeCount enrolled and enabled node agents whose
// containers use the bridge, and a committed Docker deployment.
type env struct {
	t      *testing.T
	core   *stack.Core
	nodes  []*stack.Node
	cc     *grpc.ClientConn
	admin  context.Context // carries the administrator's token
	engine *client.Client
	inst   string // the installation id
}

func newEnv(t *testing.T) *env {
	t.Helper()
	host := testenv.DockerHost(t)
	image := testenv.RuntimeImage(t)
	engine, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	opts, _ := stack.RuntimeGateway(t, engine)
	e := &env{t: t, engine: engine}
	e.core = stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true, opts)
	e.cc, e.admin = e.core.AdminClient(t)
	e.inst = stack.InstallationID(t, e.admin, e.cc)
	for range nodeCount {
		listen := stack.FreeAddr(t)
		n := stack.PrepareNode(t, &stack.Installation{ID: e.inst}, stack.NodeOptions{
			Socket: strings.TrimPrefix(host, "unix://"), Image: image, Listen: listen, Network: "bridge",
		})
		if out, code := stack.EnrollCmd(t, n, e.core.PublicAddr(), stack.CreateEnrollmentToken(t, e.admin, e.cc), listen); code != 0 {
			t.Fatalf("enroll: %s", out)
		}
		n.Start()
		t.Cleanup(n.Stop)
		e.nodes = append(e.nodes, n)
	}
	stack.EnableAll(t, e.admin, e.cc)
	stack.CommitDockerDeployment(t, e.admin, e.cc, &adminv1.Specification{
		CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4,
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", e.core.Logs())
		}
		for _, n := range e.nodes {
			n.Stop()
		}
		e.core.Stop()
		stack.RemoveOwned(t, engine, e.inst)
	})
	return e
}

// logs is everything Core and the node agents wrote so far.
func (e *env) logs() map[string]string {
	out := map[string]string{"berth-core": e.core.Logs()}
	for i, n := range e.nodes {
		out["berth-nodeagent "+string(rune('1'+i))] = n.Logs()
	}
	return out
}

// project is one tenant's project and its key, made through the admin
// API with the administrator's token.
type project struct {
	tenant  string // "tenants/{tenant}"
	name    string // "tenants/{tenant}/projects/{project}"
	keyName string // "tenants/{tenant}/projects/{project}/keys/{key}"
	token   string // the key's token, shown once
	ctx     context.Context
}

// tenantID is the tenant's uuid, the engine's io.berth.tenant label.
func (p project) tenantID() string { return strings.TrimPrefix(p.tenant, "tenants/") }

// secret is the token's secret part (after its last dot).
func (p project) secret() string { return p.token[strings.LastIndex(p.token, ".")+1:] }

// newProject creates a tenant, a project in it and a key of the project.
func (e *env) newProject(label string) project {
	e.t.Helper()
	api := adminv1.NewProjectServiceClient(e.cc)
	tn, err := api.CreateTenant(e.admin, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "team-" + label}})
	if err != nil {
		e.t.Fatalf("CreateTenant: %v", err)
	}
	pr, err := api.CreateProject(e.admin, &adminv1.CreateProjectRequest{
		Parent: tn.GetTenant().GetName(), RequestId: uuid.NewString(), Project: &adminv1.Project{DisplayName: "app-" + label},
	})
	if err != nil {
		e.t.Fatalf("CreateProject: %v", err)
	}
	k, err := api.CreateProjectKey(e.admin, &adminv1.CreateProjectKeyRequest{
		Parent: pr.GetProject().GetName(), RequestId: uuid.NewString(), Key: &adminv1.ProjectKey{DisplayName: "agent-" + label},
	})
	if err != nil {
		e.t.Fatalf("CreateProjectKey: %v", err)
	}
	if !strings.HasPrefix(k.GetToken(), "berth-key-v1.") {
		e.t.Fatalf("CreateProjectKey returned token %q", k.GetToken())
	}
	return project{
		tenant: tn.GetTenant().GetName(), name: pr.GetProject().GetName(), keyName: k.GetKey().GetName(), token: k.GetToken(),
		ctx: metadata.NewOutgoingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+k.GetToken())),
	}
}

// waitAdmitted waits (reading as the administrator) until the Session's
// Runtime accepts Turns, and returns the Session.
func (e *env) waitAdmitted(name string) *adminv1.Session {
	e.t.Helper()
	var s *adminv1.Session
	stack.WaitFor(e.t, 2*time.Minute, "execution admitted for "+name, func() bool {
		resp, err := adminv1.NewSessionServiceClient(e.cc).GetSession(e.admin, &adminv1.GetSessionRequest{Name: name})
		if err != nil {
			e.t.Fatal(err)
		}
		s = resp.GetSession()
		return s.GetEnvironment().GetExecutionAdmitted()
	})
	return s
}

// output is a Turn's streamed output.
type output struct{ stdout, stderr string }

// stream reads a Turn's output stream to its end with ctx's credentials.
func (e *env) stream(ctx context.Context, turn string) (output, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := adminv1.NewTurnServiceClient(e.cc).StreamTurnOutput(ctx, &adminv1.StreamTurnOutputRequest{Name: turn})
	if err != nil {
		return output{}, err
	}
	var o output
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return o, nil
		}
		if err != nil {
			return o, err
		}
		if m.GetStream() == adminv1.OutputStream_OUTPUT_STREAM_STDERR {
			o.stderr += string(m.GetData())
		} else {
			o.stdout += string(m.GetData())
		}
	}
}

func shell(script string) *adminv1.Turn {
	return &adminv1.Turn{
		Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: script}},
		Timeout: durationpb.New(2 * time.Minute), QueueTimeout: durationpb.New(time.Minute),
	}
}
