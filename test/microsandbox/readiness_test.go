package microsandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// TestMicrosandboxNodeReportsWhyItIsNotReady: a node agent configured for
// microsandbox, with the real pinned msb and its own msb home, is
// enrolled, enabled and serves a committed microsandbox deployment; on a
// host without hardware virtualization (the CI machines) it stays
// connected and not ready with the fixed diagnostic
// hardware_virtualization_unavailable, which GetNode and `berthctl node
// list` show. The diagnostic expected is read from the host itself, so on
// a host with VT-x or AMD-V the same test expects the next missing
// prerequisite: the runtime image, which this test never loads.
func TestMicrosandboxNodeReportsWhyItIsNotReady(t *testing.T) {
	msb := testenv.MSB(t)
	want := expectedDiagnostic(t)
	core := stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true, stack.CoreOptions{})
	cc, ctx := core.AdminClient(t)
	installation := stack.InstallationID(t, ctx, cc)
	logOnFailure(t, core)

	startNode(t, core, ctx, cc, installation, msb)
	name := stack.EnableAll(t, ctx, cc)[0]

	resp, err := adminv1.NewDeploymentServiceClient(cc).CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "microsandbox", Specification: stack.DefaultSpecification(),
	}})
	if err != nil {
		t.Fatalf("CommitDeployment of a microsandbox deployment: %v", err)
	}
	generation := resp.GetDeployment().GetGeneration()
	stack.WaitPublished(t, ctx, cc, generation)

	node := stack.WaitNode(t, ctx, adminv1.NewNodeServiceClient(cc), name, func(n *adminv1.Node) bool {
		return n.GetReadiness().GetGeneration() == generation && n.GetReadiness().GetDiagnosticCode() != ""
	})
	if !node.GetPresence().GetConnected() || node.GetReadiness().GetReady() || node.GetReadiness().GetDiagnosticCode() != want {
		t.Fatalf("GetNode: connected %v, ready %v, diagnostic %q; want connected, not ready, %q",
			node.GetPresence().GetConnected(), node.GetReadiness().GetReady(), node.GetReadiness().GetDiagnosticCode(), want)
	}

	t.Logf("GetNode: backend %q, readiness %v", node.GetBackendFingerprint(), node.GetReadiness())
	if !strings.HasPrefix(node.GetBackendFingerprint(), "microsandbox:") {
		t.Errorf("GetNode: backend %q, want the node's msb home (microsandbox:<id>)", node.GetBackendFingerprint())
	}

	// berthctl, logged in as the operator, shows the same.
	home2 := t.TempDir()
	ctl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(stack.BerthctlBin(), args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home2, "BERTHCTL_CONFIG=" + filepath.Join(home2, "berthctl.json")}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("berthctl %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	ctl("login", "--address", core.AdminAddr(), "--token-file", filepath.Join(core.StateDir, "admin-token"))
	out := ctl("node", "list")
	t.Logf("berthctl node list:\n%s", out)
	row := nodeRow(t, out, name)
	if row[2] != "yes" || row[3] != "no ("+want+")" {
		t.Fatalf("berthctl node list: connected %q, ready %q; want yes and %q in\n%s", row[2], row[3], "no ("+want+")", out)
	}

	// It stays so: a later probe (one runs with every health report) says
	// the same.
	first := node.GetReadiness().GetCheckTime().AsTime()
	again := stack.WaitNode(t, ctx, adminv1.NewNodeServiceClient(cc), name, func(n *adminv1.Node) bool {
		return n.GetReadiness().GetCheckTime().AsTime().After(first)
	})
	if !again.GetPresence().GetConnected() || again.GetReadiness().GetReady() || again.GetReadiness().GetDiagnosticCode() != want {
		t.Fatalf("a later probe: connected %v, ready %v, diagnostic %q", again.GetPresence().GetConnected(),
			again.GetReadiness().GetReady(), again.GetReadiness().GetDiagnosticCode())
	}
}

// startNode enrolls and starts a node agent configured for microsandbox
// with the real msb (its own msb home in the node's folder, no image
// loaded).
func startNode(t *testing.T, core *stack.Core, ctx context.Context, cc *grpc.ClientConn, installation, msb string) *stack.Node {
	t.Helper()
	return enrollMicrosandboxNode(t, core, ctx, cc, installation, nil, func(dir string) map[string]any {
		return map[string]any{
			"msb":          msb,
			"home":         filepath.Join(dir, "msb-home"),
			"image":        "berth-runtime:readiness",
			"image_digest": "sha256:" + strings.Repeat("0", 64),
			"network":      "none",
		}
	})
}

// enrollMicrosandboxNode prepares a node agent configured for microsandbox
// with the node section section(the node's folder) and the argv prefix
// wrapper, enrolls it with a fresh token through Core and starts it; the
// test's cleanup stops it and, if the test failed, shows its log.
func enrollMicrosandboxNode(t *testing.T, core *stack.Core, ctx context.Context, cc *grpc.ClientConn, installation string,
	wrapper []string, section func(dir string) map[string]any) *stack.Node {
	t.Helper()
	listen := stack.FreeAddr(t)
	n := stack.PrepareNode(t, &stack.Installation{ID: installation}, stack.NodeOptions{Listen: listen, HealthInterval: "500ms", Wrapper: wrapper})
	n.EditConfig(func(cfg map[string]any) {
		cfg["provider"] = "microsandbox"
		cfg["node"] = section(n.Dir)
	})
	if out, code := stack.EnrollCmd(t, n, core.PublicAddr(), stack.CreateEnrollmentToken(t, ctx, cc), listen); code != 0 {
		t.Fatalf("enroll: %d %s", code, out)
	}
	n.Start()
	t.Cleanup(n.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-nodeagent (microsandbox) log:\n%s", n.Logs())
		}
	})
	return n
}

// logOnFailure shows Core's log when the test fails.
func logOnFailure(t *testing.T, core *stack.Core) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", core.Logs())
		}
	})
}

// nodeRow returns the cells of `berthctl node list`'s row for name.
func nodeRow(t *testing.T, out, name string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("berthctl node list:\n%s", out)
	}
	for _, l := range lines[1:] {
		cells := splitCells(l)
		if len(cells) >= 4 && cells[0] == name {
			return cells
		}
	}
	t.Fatalf("no row %s in\n%s", name, out)
	return nil
}

// splitCells splits a table line at runs of two or more spaces (tabwriter
// pads columns with at least two).
func splitCells(line string) []string {
	var cells []string
	for _, c := range strings.Split(strings.TrimSpace(line), "  ") {
		if c = strings.TrimSpace(c); c != "" {
			cells = append(cells, c)
		}
	}
	return cells
}

// expectedDiagnostic reads the host the way an operator checks it (the
// KVM device, the CPU flags) and returns the diagnostic a node on it must
// report: the first missing platform prerequisite, or, on a host with
// both, the runtime image, which the test never loads into msb's home.
func expectedDiagnostic(t *testing.T) string {
	t.Helper()
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return "kvm_device_missing"
	}
	f.Close()
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(cpuinfo), "\n") {
		if key, flags, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(key) == "flags" {
			for _, f := range strings.Fields(flags) {
				if f == "vmx" || f == "svm" {
					return "image_missing"
				}
			}
		}
	}
	return "hardware_virtualization_unavailable"
}
