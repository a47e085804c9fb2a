package nodeproto

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/nodetls"

	"berth.dev/core/nodes"
)

// nodeAgentBin and coreBin are the binaries built once for the package.
var nodeAgentBin, coreBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-nodeproto-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodeAgentBin = filepath.Join(dir, "berth-nodeagent")
	coreBin = filepath.Join(dir, "berth-core")
	for bin, pkg := range map[string]string{
		nodeAgentBin: "berth.dev/nodeagent/cmd/berth-nodeagent",
		coreBin:      "berth.dev/core/cmd/berth-core",
	} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the repository's root folder.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// installation is one test installation: its CA and Core's client
// certificate, as Core would hold them.
type installation struct {
	id       string
	ca       *nodetls.CA
	coreCert tls.Certificate
}

func newInstallation(t testing.TB) *installation {
	t.Helper()
	id := uuid.NewString()
	ca, err := nodetls.NewCA(id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	core, err := ca.IssueCore(id, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &installation{id: id, ca: ca, coreCert: core}
}

// node is one berth-nodeagent process and its files.
type node struct {
	t        testing.TB
	inst     *installation
	id       string
	dir      string
	config   string
	addr     string
	cmd      *exec.Cmd
	logMu    sync.Mutex
	log      strings.Builder
	exited   chan struct{}
	exitCode int
}

// nodeOptions shape a node's configuration.
type nodeOptions struct {
	socket     string // the engine's Unix socket
	image      string
	generation uint64
	listen     string // default 127.0.0.1:0
}

// enrollNode writes the node's identity the way enrollment will: a key, a
// certificate for a fresh node id signed by the installation CA, and the CA.
func enrollNode(t testing.TB, inst *installation, stateDir string) string {
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
	certDER, err := inst.ca.SignNodeCSR(csr, nodeID, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := nodetls.MarshalKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pemCert(certDER)
	identity, _ := json.Marshal(map[string]string{
		"node_id": nodeID, "installation_id": inst.id,
		"certificate_pem": string(certPEM), "key_pem": string(keyPEM), "ca_pem": string(inst.ca.CertificatePEM()),
	})
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, "identity.json"), identity, 0o600); err != nil {
		t.Fatal(err)
	}
	return nodeID
}

func startNode(t testing.TB, inst *installation, o nodeOptions) *node {
	t.Helper()
	n := prepareNode(t, inst, o)
	n.id = enrollNode(t, inst, filepath.Join(n.dir, "state"))
	n.start()
	t.Cleanup(n.stop)
	return n
}

// prepareNode writes a node's configuration without an identity and
// without starting it.
func prepareNode(t testing.TB, inst *installation, o nodeOptions) *node {
	t.Helper()
	if o.generation == 0 {
		o.generation = 1
	}
	if o.listen == "" {
		o.listen = "127.0.0.1:0"
	}
	dir, err := os.MkdirTemp("", "bnode")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "state")
	n := &node{t: t, inst: inst, dir: dir, config: filepath.Join(dir, "nodeagent.json")}
	cfg := map[string]any{
		"state_dir": state,
		"listen":    o.listen,
		"provider":  docker.Kind,
		"node": map[string]any{
			"socket": o.socket, "image": o.image, "network": "none",
			"seccomp_profile": filepath.Join(repoRoot(), "deploy", "runtime", "seccomp.json"),
		},
		"generation": map[string]any{
			"number": o.generation, "installation_id": inst.id,
			"specification": map[string]any{
				"cpu_millis": resources.CPUMillis, "memory_bytes": resources.MemoryBytes,
				"disk_bytes": resources.DiskBytes, "max_active": 8, "max_retained": 8,
			},
		},
		"health_interval": "1m",
	}
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(n.config, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

var resources = sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}

// start runs the agent and waits for it to report its address.
func (n *node) start() {
	n.t.Helper()
	n.cmd = exec.Command(nodeAgentBin, "serve", "--config", n.config)
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.exited = make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			n.logMu.Lock()
			n.log.WriteString(line + "\n")
			n.logMu.Unlock()
			var entry struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "serving the node protocol" {
				addr <- entry.Address
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		_ = n.cmd.Wait()
		n.exitCode = n.cmd.ProcessState.ExitCode()
		close(n.exited)
	}()
	select {
	case n.addr = <-addr:
	case <-n.exited:
		n.t.Fatalf("berth-nodeagent exited with %d:\n%s", n.exitCode, n.logs())
	case <-time.After(30 * time.Second):
		n.t.Fatalf("berth-nodeagent did not start:\n%s", n.logs())
	}
}

func (n *node) logs() string {
	n.logMu.Lock()
	defer n.logMu.Unlock()
	return n.log.String()
}

// kill ends the agent with SIGKILL: no cleanup, no graceful stop.
func (n *node) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// stop ends the agent with SIGTERM and checks it exits cleanly.
func (n *node) stop() {
	if n.exited == nil {
		return
	}
	select {
	case <-n.exited:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		if n.exitCode != 0 {
			n.t.Errorf("berth-nodeagent exited with %d:\n%s", n.exitCode, n.logs())
		}
	case <-time.After(20 * time.Second):
		_ = n.cmd.Process.Kill()
		n.t.Errorf("berth-nodeagent ignored SIGTERM")
	}
}

// dial connects as Core, expecting the node's identity.
func (n *node) dial(t testing.TB) *grpc.ClientConn {
	t.Helper()
	cfg, err := nodetls.ClientConfig(n.inst.coreCert, n.inst.ca.Certificate(), n.id)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := nodes.Dial(n.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// connect performs Hello and opens a connection under epoch, returning the
// connection and a proxy bound to it.
func (n *node) connect(t testing.TB, cc *grpc.ClientConn, epoch uint64) (*nodes.Connection, *nodes.Proxy) {
	t.Helper()
	client := pb.NewNodeServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hello, ops, err := nodes.Hello(ctx, client)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello.GetNodeId() != n.id {
		t.Fatalf("hello names node %q, want %q", hello.GetNodeId(), n.id)
	}
	conn, err := nodes.Open(ctx, client, epoch, hello.GetGeneration())
	if err != nil {
		t.Fatalf("open connection: %v", err)
	}
	t.Cleanup(conn.Close)
	proxy, err := nodes.NewProxy(ops, func(context.Context) (*nodes.Session, error) { return &conn.Session, nil })
	if err != nil {
		t.Fatal(err)
	}
	return conn, proxy
}

// fixtureEngine starts a Docker API fixture on a short Unix socket path.
func fixtureEngine(t testing.TB) *dockertest.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "beng")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv := dockertest.StartUnix(t, filepath.Join(dir, "docker.sock"))
	srv.PutImage(fixtureImage)
	return srv
}

const fixtureImage = "sha256:4f3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c"
