package microsandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// nativeEnv opts a host with hardware virtualization into the native
// part (make check-microsandbox-provider sets it).
const nativeEnv = "BERTH_TEST_MICROSANDBOX"

// TestMicrosandboxTurnThroughTheRuntime is the whole path on microsandbox:
// Core with its Runtime gateway on the host's address (TLS from the
// installation CA), a node agent with the real msb and the runtime image
// loaded into its msb home, a Session whose Runtime boots in a microVM and
// connects back, a Turn run through it, and a deletion that leaves msb and
// the node's state directory holding nothing of the Session.
//
// Its gate is the native acceptance suite's: on a host that can boot a
// microVM (/dev/kvm and VT-x or AMD-V) it runs whole, opted in or in CI;
// BERTH_TEST_MICROSANDBOX=1 on a host that cannot fails; outside CI
// without the opt-in it is skipped, saying why. In CI on a host that
// cannot boot (CI's machines) it checks what such a fleet does instead: the
// node stays not ready with the platform's diagnostic and CreateSession is
// refused FAILED_PRECONDITION no_ready_node_with_capacity, creating
// nothing in msb; it logs that the Turn did not run.
func TestMicrosandboxTurnThroughTheRuntime(t *testing.T) {
	msb := testenv.MSB(t)
	diagnostic := expectedDiagnostic(t)
	canBoot := diagnostic == "image_missing" // the platform is there
	optedIn := os.Getenv(nativeEnv) == "1"
	switch {
	case optedIn && !canBoot:
		t.Fatalf("%s=1, but this host cannot boot a microVM (%s)", nativeEnv, diagnostic)
	case !canBoot && !testenv.InCI():
		t.Skipf("this host cannot boot a microVM (%s): the Turn through a microVM runs on a host with VT-x or AMD-V "+
			"(make check-microsandbox-provider); in CI this test checks the refusal instead", diagnostic)
	}

	gateway := stack.FreeAddrOn(t, hostAddress(t))
	core := stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true,
		stack.CoreOptions{PublicURL: "https://" + gateway, RuntimeListen: gateway})
	cc, ctx := core.AdminClient(t)
	installation := stack.InstallationID(t, ctx, cc)
	logOnFailure(t, core)

	n := startNode(t, core, ctx, cc, installation, msb)
	home := filepath.Join(n.Dir, "msb-home")
	if canBoot {
		image, digest := loadRuntimeImage(t, msb, home)
		n.Stop()
		n.EditConfig(func(cfg map[string]any) {
			node := cfg["node"].(map[string]any)
			node["image"], node["image_digest"] = image, digest
		})
		n.Start()
	}
	name := stack.EnableAll(t, ctx, cc)[0]
	resp, err := adminv1.NewDeploymentServiceClient(cc).CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "microsandbox", Specification: stack.DefaultSpecification(),
	}})
	if err != nil {
		t.Fatalf("CommitDeployment of a microsandbox deployment: %v", err)
	}
	generation := resp.GetDeployment().GetGeneration()
	stack.WaitPublished(t, ctx, cc, generation)
	nodes := adminv1.NewNodeServiceClient(cc)
	sessions := adminv1.NewSessionServiceClient(cc)

	if !canBoot {
		node := stack.WaitNode(t, ctx, nodes, name, func(n *adminv1.Node) bool {
			return n.GetReadiness().GetGeneration() == generation && n.GetReadiness().GetDiagnosticCode() != ""
		})
		if node.GetReadiness().GetReady() || node.GetReadiness().GetDiagnosticCode() != diagnostic {
			t.Fatalf("GetNode: ready %v, diagnostic %q; want not ready, %q", node.GetReadiness().GetReady(),
				node.GetReadiness().GetDiagnosticCode(), diagnostic)
		}
		_, err := sessions.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
		if stack.AdminReason(err) != "no_ready_node_with_capacity" {
			t.Fatalf("CreateSession on a fleet that cannot boot a microVM: %v; want FAILED_PRECONDITION no_ready_node_with_capacity", err)
		}
		if got := msbList(t, msb, home, installation); len(got) != 0 {
			t.Fatalf("msb holds %d sandboxes of the installation after the refusal, want none", len(got))
		}
		t.Logf("CI=true, %s unset: this host cannot boot a microVM (%s); the node said so and the Session was refused. "+
			"The Turn through a microVM did not run (make check-microsandbox-provider on a host with VT-x/AMD-V runs it)", nativeEnv, diagnostic)
		return
	}

	stack.WaitNode(t, ctx, nodes, name, func(n *adminv1.Node) bool {
		return n.GetReadiness().GetGeneration() == generation && n.GetReadiness().GetReady()
	})
	created, err := sessions.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	session := created.GetSession().GetName()
	stack.WaitFor(t, 5*time.Minute, "execution admitted", func() bool {
		got, err := sessions.GetSession(ctx, &adminv1.GetSessionRequest{Name: session})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetSession().GetEnvironment().GetExecutionAdmitted()
	})
	if got := msbList(t, msb, home, installation); len(got) != 1 {
		t.Fatalf("msb holds %d sandboxes of the installation, want the Session's one", len(got))
	}

	// The Turn reads its kernel: the microVM's own, not the host's.
	hostKernel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	out := runTurn(t, ctx, adminv1.NewTurnServiceClient(cc), session, "echo turn-ran; cat /proc/sys/kernel/osrelease")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != "turn-ran" {
		t.Fatalf("the Turn printed %q, want turn-ran and the kernel release", out)
	}
	if lines[1] == strings.TrimSpace(string(hostKernel)) {
		t.Errorf("the Turn ran on the host's kernel %s, want the microVM's own", lines[1])
	}

	if _, err := sessions.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: session}); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	stack.WaitFor(t, 3*time.Minute, "msb holds nothing of the installation", func() bool {
		return len(msbList(t, msb, home, installation)) == 0
	})
	generations, err := os.ReadDir(filepath.Join(n.Dir, "state", "generations"))
	if err != nil || len(generations) == 0 {
		t.Fatalf("the node's generation state directories: %v (%d)", err, len(generations))
	}
	for _, g := range generations {
		dirs, err := os.ReadDir(filepath.Join(n.Dir, "state", "generations", g.Name(), "microsandbox"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if len(dirs) != 0 {
			t.Errorf("generation %s's state directory still holds %d sandbox directories after the deletion", g.Name(), len(dirs))
		}
	}
}

// runTurn submits a shell Turn, streams its output to the end and
// requires it COMPLETED with exit 0; it returns stdout.
func runTurn(t *testing.T, ctx context.Context, turns adminv1.TurnServiceClient, session, script string) string {
	t.Helper()
	sub, err := turns.SubmitTurn(ctx, &adminv1.SubmitTurnRequest{Parent: session, RequestId: uuid.NewString(), Turn: &adminv1.Turn{
		Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: script}},
	}})
	if err != nil {
		t.Fatalf("SubmitTurn: %v", err)
	}
	name := sub.GetTurn().GetName()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	st, err := turns.StreamTurnOutput(sctx, &adminv1.StreamTurnOutputRequest{Name: name})
	if err != nil {
		t.Fatalf("StreamTurnOutput: %v", err)
	}
	var stdout bytes.Buffer
	for {
		m, err := st.Recv()
		if err != nil {
			break
		}
		if m.GetStream() != adminv1.OutputStream_OUTPUT_STREAM_STDERR {
			stdout.Write(m.GetData())
		}
	}
	got, err := turns.GetTurn(ctx, &adminv1.GetTurnRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTurn().GetState() != adminv1.Turn_STATE_COMPLETED || got.GetTurn().GetExitCode() != 0 {
		t.Fatalf("the Turn ended %v, exit %d, failure %q; stdout %q", got.GetTurn().GetState(), got.GetTurn().GetExitCode(),
			got.GetTurn().GetFailureCode(), stdout.String())
	}
	return stdout.String()
}

// loadRuntimeImage loads the runtime image archive (BERTH_TEST_MSB_IMAGE,
// or one built here by scripts/build-runtime-image, which needs root) into
// the node's msb home, as an operator does, and returns the tag and the
// digest msb reports, checked against the one the build printed.
func loadRuntimeImage(t *testing.T, msb, home string) (string, string) {
	t.Helper()
	archive, want := os.Getenv("BERTH_TEST_MSB_IMAGE"), os.Getenv("BERTH_TEST_MSB_IMAGE_DIGEST")
	if archive == "" {
		archive = filepath.Join(t.TempDir(), "berth-runtime-image.tar")
		_, file, _, _ := runtime.Caller(0)
		out, err := exec.Command(filepath.Join(filepath.Dir(file), "..", "..", "scripts", "build-runtime-image"), "--output", archive).Output()
		if err != nil {
			t.Fatalf("scripts/build-runtime-image --output (needs root): %v", err)
		}
		m := regexp.MustCompile(`(?m)^BERTH_RUNTIME_IMAGE_MSB_DIGEST=(sha256:[0-9a-f]{64})$`).FindSubmatch(out)
		if m == nil {
			t.Fatal("build-runtime-image printed no BERTH_RUNTIME_IMAGE_MSB_DIGEST")
		}
		want = string(m[1])
	}
	const tag = "berth-runtime:turn"
	msbRun(t, msb, home, "load", "-i", archive, "-t", tag)
	var img struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(msbRun(t, msb, home, "image", "inspect", tag, "--format", "json"), &img); err != nil {
		t.Fatalf("msb image inspect: %v", err)
	}
	if want != "" && img.Digest != want {
		t.Fatalf("msb loaded the archive as %s, want %s", img.Digest, want)
	}
	return tag, img.Digest
}

// msbList is the installation's sandboxes as msb itself lists them.
func msbList(t *testing.T, msb, home, installation string) []json.RawMessage {
	t.Helper()
	var list []json.RawMessage
	out := msbRun(t, msb, home, "list", "--label", "io.berth.installation="+installation, "--format", "json")
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("msb list: %v: %q", err, out)
	}
	return list
}

func msbRun(t *testing.T, msb, home string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(msb, args...)
	cmd.Env = []string{"MSB_HOME=" + home, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("msb %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// hostAddress is the host's address a microVM reaches it at: the source
// of its default route (no packet is sent), else its first non-loopback
// IPv4 address.
func hostAddress(t *testing.T) string {
	t.Helper()
	if c, err := net.Dial("udp4", "192.0.2.1:9"); err == nil {
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).IP.String()
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			return ip.IP.String()
		}
	}
	t.Fatal("the host has no non-loopback IPv4 address for the Runtime gateway")
	return ""
}
