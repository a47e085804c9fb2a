package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// nodeAgentBin and coreBin are the binaries Main built for the test binary.
var nodeAgentBin, coreBin string

// CoreBinEnv names a berth-core binary to run instead of the one Main
// builds from this tree: a before/after measurement runs the same probe
// against a binary built from an older commit.
const CoreBinEnv = "BERTH_TEST_CORE_BIN"

// Main builds berth-nodeagent and berth-core into a temporary folder, runs
// the tests and exits with their code. Call it from TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit: it builds the binaries, runs the tests and
// returns their exit code (1 when a build fails).
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "berth-stack-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
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
			return 1
		}
	}
	if bin := os.Getenv(CoreBinEnv); bin != "" {
		coreBin = bin
	}
	return m.Run()
}

// NodeAgentBin is the path of the berth-nodeagent binary built by Main.
func NodeAgentBin() string { return nodeAgentBin }

// CoreBin is the path of the berth-core binary built by Main.
func CoreBin() string { return coreBin }

// RepoRoot is the repository's root folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
