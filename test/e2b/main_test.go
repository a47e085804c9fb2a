package e2b

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"berth.dev/test/internal/stack"
)

// runtimeBin is the berth-runtime binary TestMain built: what every
// fixture sandbox runs at runtimebootstrap.BinaryPath.
var runtimeBin string

// TestMain builds berth-runtime (with -race when this binary has it, as
// stack does for Core), then berthctl, berth-core and berth-nodeagent
// (stack.RunWithBerthctl), and runs the tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-e2b-runtime")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runtimeBin = filepath.Join(dir, "berth-runtime")
	args := []string{"build", "-o", runtimeBin}
	if stack.RaceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "berth.dev/runtimebootstrap/cmd/berth-runtime")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build berth-runtime:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := stack.RunWithBerthctl(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
