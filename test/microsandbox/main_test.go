package microsandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"berth.dev/sandbox/microsandbox/msbtest"

	"berth.dev/test/internal/stack"
)

// berthctlBin is the berthctl binary TestMain builds.
var berthctlBin string

// TestMain builds berthctl beside the binaries stack.Run builds, then runs
// the tests; it removes the fakemsb that msbtest builds for them.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berthctl-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	berthctlBin = filepath.Join(dir, "berthctl")
	build := exec.Command("go", "build", "-o", berthctlBin, "berth.dev/core/cmd/berthctl")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build berthctl:", err)
	} else {
		code = stack.Run(m)
	}
	os.RemoveAll(dir)
	msbtest.Cleanup()
	os.Exit(code)
}
