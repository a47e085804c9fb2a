package stack

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	"berth.dev/platform/nodetls"
	"berth.dev/platform/nodewire"
	adminv1 "berth.dev/proto/berth/admin/v1"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/providers"

	"berth.dev/core/nodes"
)

// Installation is one test installation: its CA and Core's client
// certificate, as Core would hold them. Only ID is set for installations
// whose CA lives in a real berth-core.
type Installation struct {
	ID       string
	CA       *nodetls.CA
	CoreCert tls.Certificate
}

// NewInstallation mints an installation id, its CA and Core's client
// certificate.
func NewInstallation(t testing.TB) *Installation {
	t.Helper()
	id := uuid.NewString()
	Track(id)
	ca, err := nodetls.NewCA(id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	core, err := ca.IssueCore(id, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &Installation{ID: id, CA: ca, CoreCert: core}
}

// Node is one berth-nodeagent process and its files.
type Node struct {
	t      testing.TB
	Inst   *Installation
	ID     string // the enrolled node id
	Dir    string // holds the configuration and the state directory
	Config string // the configuration file
	Addr   string // the address the agent serves on, once started
	Cmd    *exec.Cmd
	// Exited is closed when the running process has exited; ExitCode is
	// then its exit code.
	Exited   chan struct{}
	ExitCode int
	log      processLog

	// generation and spec are what Connect publishes.
	generation uint64
	spec       *adminv1.Specification
	// Bin is the binary it runs ("": Main's).
	Bin string
	// env is NodeOptions.Env, wrapper NodeOptions.Wrapper.
	env, wrapper []string
}

// NodeOptions shape a node's configuration.
type NodeOptions struct {
	Socket  string // the engine's Unix socket
	Image   string
	Listen  string // default 127.0.0.1:0
	Network string // the containers' network; default "none"
	// Generation (default 1) and Specification (default
	// DefaultSpecification) are the generation Node.Connect publishes when
	// a test drives the node directly. A node under Core serves what Core
	// publishes (the committed generation), whatever these say.
	Generation    uint64
	Specification *adminv1.Specification
	// Bin is the berth-nodeagent binary to run (default: the one Main
	// built from this tree), e.g. the one a release package installs.
	Bin string
	// Capacity is the configuration's capacity section, written as given.
	// Nil writes zero reserves: the node tests size their sandboxes
	// against the whole host, as before the host reserve existed; give an
	// empty map for the defaults.
	Capacity map[string]any
	// MetricsListen, when set, is the configuration's metrics_listen.
	MetricsListen string
	// Env are extra environment entries (KEY=value) of the agent's
	// process, after the test's own.
	Env []string
	// HealthInterval is the configuration's health_interval: the period
	// of health reports, and of the adapter's upkeep that runs beside each
	// probe. Empty leaves it out, so the agent runs at its own default
	// (nodeagent.DefaultHealthInterval), as installed.
	HealthInterval string
	// Wrapper is an argv prefix of the serving agent process (not of
	// enrollment), e.g. `unshare --mount sh -c '<mounts> && exec "$@"' --`,
	// so a test can run the real agent in a private mount namespace with
	// host files of its own. The wrapper must exec the agent, so that Stop
	// and Kill signal the agent itself.
	Wrapper []string
}

// DefaultSpecification is the specification a node is configured with
// when its NodeOptions give none.
func DefaultSpecification() *adminv1.Specification {
	return &adminv1.Specification{
		CpuMillis: Resources.CPUMillis, MemoryBytes: Resources.MemoryBytes, DiskBytes: Resources.DiskBytes,
		MaxActive: 8, MaxRetained: 8,
	}
}

// Resources are the sandbox resources the node tests request.
var Resources = sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}

// PEMCert encodes a DER certificate as PEM.
func PEMCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EnrollNode writes a node's identity the way enrollment does: a key, a
// certificate for a fresh node id signed by the installation CA, and the
// CA. It returns the node id.
func EnrollNode(t testing.TB, inst *Installation, stateDir string) string {
	t.Helper()
	nodeID := uuid.NewString()
	key, err := nodetls.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := nodetls.NewCSR(key, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	certDER, err := inst.CA.SignNodeCSR(csr, nodeID, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := nodetls.MarshalKey(key)
	if err != nil {
		t.Fatal(err)
	}
	identity, _ := json.Marshal(map[string]string{
		"node_id": nodeID, "installation_id": inst.ID,
		"certificate_pem": string(PEMCert(certDER)), "key_pem": string(keyPEM), "ca_pem": string(inst.CA.CertificatePEM()),
	})
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, "identity.json"), identity, 0o600); err != nil {
		t.Fatal(err)
	}
	return nodeID
}

// StartNode prepares a node, writes its identity with EnrollNode and starts
// it; the test's cleanup stops it.
func StartNode(t testing.TB, inst *Installation, o NodeOptions) *Node {
	t.Helper()
	n := PrepareNode(t, inst, o)
	n.ID = EnrollNode(t, inst, filepath.Join(n.Dir, "state"))
	n.Start()
	t.Cleanup(n.Stop)
	return n
}

// PrepareNode writes a node's configuration without an identity and
// without starting it.
func PrepareNode(t testing.TB, inst *Installation, o NodeOptions) *Node {
	t.Helper()
	Track(inst.ID)
	if o.Generation == 0 {
		o.Generation = 1
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.Network == "" {
		o.Network = "none"
	}
	spec := o.Specification
	if spec == nil {
		spec = DefaultSpecification()
	}
	capacity := o.Capacity
	if capacity == nil {
		capacity = map[string]any{"reserve": map[string]any{"cpu_millis": 0, "memory_bytes": 0, "disk_bytes": 0}}
	}
	dir, err := os.MkdirTemp("", "bnode")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "state")
	n := &Node{t: t, Inst: inst, Dir: dir, Config: filepath.Join(dir, "nodeagent.json"), generation: o.Generation, spec: spec, Bin: o.Bin, env: o.Env, wrapper: o.Wrapper}
	cfg := map[string]any{
		"state_dir": state,
		"listen":    o.Listen,
		"provider":  docker.Kind,
		"node": map[string]any{
			"socket": o.Socket, "image": o.Image, "network": o.Network,
			"seccomp_profile": filepath.Join(RepoRoot(), "deploy", "runtime", "seccomp.json"),
		},
		"capacity": capacity,
	}
	if o.HealthInterval != "" {
		cfg["health_interval"] = o.HealthInterval
	}
	if o.MetricsListen != "" {
		cfg["metrics_listen"] = o.MetricsListen
	}
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(n.Config, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// EditConfig rewrites the node's configuration file with edit (a stopped
// node reads it at its next Start).
func (n *Node) EditConfig(edit func(cfg map[string]any)) {
	n.t.Helper()
	data, err := os.ReadFile(n.Config)
	if err != nil {
		n.t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		n.t.Fatal(err)
	}
	edit(cfg)
	if data, err = json.Marshal(cfg); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(n.Config, data, 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// Start runs the agent and waits for it to report its address.
func (n *Node) Start() {
	n.t.Helper()
	argv := append(append([]string(nil), n.wrapper...), n.bin(), "serve", "--config", n.Config)
	n.Cmd = exec.Command(argv[0], argv[1:]...)
	if len(n.env) > 0 {
		n.Cmd.Env = append(os.Environ(), n.env...)
	}
	stderr, err := n.Cmd.StderrPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.Cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.Exited = make(chan struct{})
	addr := make(chan string, 1)
	drained := n.log.follow(stderr, func(line string) {
		var entry struct {
			Msg     string `json:"msg"`
			Address string `json:"address"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "serving the node protocol" {
			addr <- entry.Address
		}
	})
	cmd, exited := n.Cmd, n.Exited
	go func() {
		<-drained // os/exec: read the whole log before Wait closes the pipe
		_ = cmd.Wait()
		n.ExitCode = cmd.ProcessState.ExitCode()
		close(exited)
	}()
	select {
	case n.Addr = <-addr:
	case <-n.Exited:
		n.t.Fatalf("berth-nodeagent exited with %d:\n%s", n.ExitCode, n.Logs())
	case <-time.After(30 * time.Second):
		n.t.Fatalf("berth-nodeagent did not start:\n%s", n.Logs())
	}
}

// bin is the binary the node runs (NodeOptions.Bin, or Main's).
func (n *Node) bin() string {
	if n.Bin != "" {
		return n.Bin
	}
	return nodeAgentBin
}

// Logs is everything the agent wrote to stderr, across its starts.
func (n *Node) Logs() string { return n.log.String() }

// Kill ends the agent with SIGKILL: no cleanup, no graceful stop.
func (n *Node) Kill() {
	_ = n.Cmd.Process.Signal(syscall.SIGKILL)
	<-n.Exited
}

// Stop ends the agent with SIGTERM and checks it exits cleanly.
func (n *Node) Stop() {
	if n.Exited == nil {
		return
	}
	select {
	case <-n.Exited:
		return // a Kill or a crash: the test has seen to it
	default:
	}
	if !Terminate(n.Cmd, n.Exited, 20*time.Second) {
		n.t.Errorf("berth-nodeagent ignored SIGTERM")
	} else if n.ExitCode != 0 {
		n.t.Errorf("berth-nodeagent exited with %d:\n%s", n.ExitCode, n.Logs())
	}
}

// Dial connects as Core, expecting the node's identity.
func (n *Node) Dial(t testing.TB) *grpc.ClientConn {
	t.Helper()
	cfg, err := nodetls.ClientConfig(n.Inst.CoreCert, n.Inst.CA.Certificate(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := nodes.Dial(n.Addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Published is the generation Connect publishes: NodeOptions.Generation
// with NodeOptions.Specification, of the provider the node's configuration
// names (Docker unless EditConfig changed it), as Core would publish it.
func (n *Node) Published() nodewire.Generation {
	spec := sandbox.Specification{
		Resources: sandbox.Resources{CPUMillis: n.spec.GetCpuMillis(), MemoryBytes: n.spec.GetMemoryBytes(), DiskBytes: n.spec.GetDiskBytes()},
		MaxActive: n.spec.GetMaxActive(), MaxRetained: n.spec.GetMaxRetained(),
	}
	if p := n.spec.GetSuspension(); p != nil {
		spec.Suspension = sandbox.SuspensionPolicy{Idle: p.GetIdle().AsDuration(), Retention: p.GetRetention().AsDuration()}
	}
	kind := n.provider()
	return nodewire.Generation{
		Number: n.generation, ProviderKind: kind, Public: []byte(`{}`), Specification: spec,
		DeploymentDigest: providers.DeploymentDigest(kind, spec),
	}
}

// provider is the provider kind the node's configuration file names.
func (n *Node) provider() string {
	n.t.Helper()
	data, err := os.ReadFile(n.Config)
	if err != nil {
		n.t.Fatal(err)
	}
	var cfg struct {
		Provider string `json:"provider"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Provider == "" {
		n.t.Fatalf("node configuration names no provider: %v", err)
	}
	return cfg.Provider
}

// Connect performs Hello, opens a connection under epoch and publishes
// the node's generation (Published) on it, returning the connection and a
// proxy bound to it that calls for that generation.
func (n *Node) Connect(t testing.TB, cc *grpc.ClientConn, epoch uint64) (*nodes.Connection, *nodes.Proxy) {
	t.Helper()
	client := pb.NewNodeServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hello, ops, err := nodes.Hello(ctx, client)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello.GetNodeId() != n.ID {
		t.Fatalf("hello names node %q, want %q", hello.GetNodeId(), n.ID)
	}
	conn, err := nodes.Open(ctx, client, epoch)
	if err != nil {
		t.Fatalf("open connection: %v", err)
	}
	t.Cleanup(conn.Close)
	if _, err := conn.ServeGenerations(ctx, []nodewire.Generation{n.Published()}); err != nil {
		t.Fatalf("serve generation %d: %v", n.generation, err)
	}
	conn.Generation = n.generation
	proxy, err := nodes.NewProxy(ops, func(context.Context) (*nodes.Session, error) { return &conn.Session, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, proxy
}

// EnrollCmd runs `berth-nodeagent enroll` for a node prepared by
// PrepareNode against Core's enrollment address, advertising advertise,
// and returns its combined output and exit code. The token travels in a
// file; the test fails if its secret appears in the output.
func EnrollCmd(t testing.TB, n *Node, coreAddr, token, advertise string) (string, int) {
	t.Helper()
	tokenFile := filepath.Join(n.Dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(n.bin(), "enroll", "--config", n.Config, "--core", coreAddr,
		"--token-file", tokenFile, "--advertise", advertise)
	out, _ := cmd.CombinedOutput()
	if parts := strings.Split(token, "."); len(parts) == 4 && strings.Contains(string(out), parts[2]) {
		t.Fatalf("the token's secret appeared in the output:\n%s", out)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// FixtureEngine starts a Docker API fixture on a short Unix socket path,
// holding FixtureImage.
func FixtureEngine(t testing.TB) *dockertest.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "beng")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv := dockertest.StartUnix(t, filepath.Join(dir, "docker.sock"))
	srv.PutImage(FixtureImage)
	return srv
}

// FixtureImage is the image id the fixture engine holds.
const FixtureImage = "sha256:4f3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c"
