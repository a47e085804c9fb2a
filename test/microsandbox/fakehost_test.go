package microsandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"berth.dev/sandbox/microsandbox/msbtest"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// fakeHost is a host on which a microsandbox node agent passes or fails
// the probe as a host with or without hardware virtualization would,
// although no microVM boots here: msb is fakemsb laid out as the pinned
// release (msbtest.Fixture.Install) over a home that holds the pinned
// image, and the agent runs under Wrapper, in a private mount namespace
// where /proc/cpuinfo is a copy of the host's with the vmx flag added (or
// vmx and svm removed). /dev/kvm and the host's memory stay the real ones.
type fakeHost struct {
	// MSB is the fixture the node's msb drives; read it for the native
	// side.
	MSB *msbtest.Fixture
	// Wrapper is the node agent's argv prefix (stack.NodeOptions.Wrapper).
	Wrapper []string
}

// newFakeHost prepares a fake host for a node of installation whose CPUs
// have hardware virtualization when virtualization is set. A host where
// the agent cannot have a private mount namespace (no unshare, not root)
// fails the test under CI=true and skips it otherwise.
func newFakeHost(t *testing.T, installation string, virtualization bool) *fakeHost {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err == nil {
		err = exec.Command(unshare, "--mount", "true").Run()
	}
	if err != nil {
		testenv.Unavailable(t, "no private mount namespace for the node agent (unshare --mount: "+err.Error()+")")
	}
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
		testenv.Unavailable(t, "no usable /dev/kvm: the probe checks it before the CPU flags")
	} else {
		f.Close()
	}
	dir := t.TempDir()
	cpuinfo := filepath.Join(dir, "cpuinfo")
	if err := os.WriteFile(cpuinfo, cpuFlags(t, virtualization), 0o444); err != nil {
		t.Fatal(err)
	}
	msb := msbtest.Start(t, installation)
	msb.Install(filepath.Join(dir, "microsandbox"))
	return &fakeHost{MSB: msb, Wrapper: []string{
		unshare, "--mount", "sh", "-c", `mount --bind "$1" /proc/cpuinfo && shift && exec "$@"`, "sh", cpuinfo,
	}}
}

// cpuFlags is the host's /proc/cpuinfo with every flags line given vmx
// (virtualization) or stripped of vmx and svm.
func cpuFlags(t *testing.T, virtualization bool) []byte {
	t.Helper()
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	changed := 0
	for i, line := range lines {
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		flags := slices.DeleteFunc(strings.Fields(value), func(f string) bool { return f == "vmx" || f == "svm" })
		if virtualization {
			flags = append(flags, "vmx")
		}
		lines[i] = key + ": " + strings.Join(flags, " ")
		changed++
	}
	if changed == 0 {
		t.Fatal("/proc/cpuinfo has no flags line to change")
	}
	return []byte(strings.Join(lines, "\n"))
}

// section is the node agent's node section for the host's msb.
func (h *fakeHost) section(string) map[string]any {
	return map[string]any{
		"msb":          h.MSB.Bin,
		"home":         h.MSB.Home,
		"image":        msbtest.Image,
		"image_digest": msbtest.ImageDigest,
		"network":      "none",
	}
}

// startFakeNode prepares a node agent configured for microsandbox on h,
// enrolls it with a fresh token through Core and starts it under h's
// wrapper; the test's cleanup stops it and, if the test failed, shows its
// log.
func startFakeNode(t *testing.T, core *stack.Core, ctx context.Context, cc *grpc.ClientConn, installation string, h *fakeHost) *stack.Node {
	t.Helper()
	return enrollMicrosandboxNode(t, core, ctx, cc, installation, h.Wrapper, h.section)
}

// backendID is the backend id the node's adapter wrote into msb's home.
func (h *fakeHost) backendID(t *testing.T) string {
	t.Helper()
	id, err := os.ReadFile(filepath.Join(h.MSB.Home, "berth-backend-id"))
	if err != nil {
		t.Fatalf("msb's home holds no backend id: %v", err)
	}
	return strings.TrimSpace(string(id))
}
