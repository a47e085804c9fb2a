package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// nodeAgentBin and coreBin are the binaries Main built for the test binary.
var nodeAgentBin, coreBin string

// CoreBinEnv names a berth-core binary to run instead of the one Main
// builds from this tree: a before/after measurement runs the same probe
// against a binary built from an older commit.
const CoreBinEnv = "BERTH_TEST_CORE_BIN"

// Main builds berth-nodeagent and berth-core into a temporary folder (with
// -race when the test binary has the race detector), runs the tests and
// exits with their code. Call it from TestMain.
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
		args := []string{"build", "-o", bin}
		if RaceBuild {
			// The harness runs under the race detector: so do the
			// processes it starts (DataRaces reads their reports).
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, pkg)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			return 1
		}
	}
	if bin := os.Getenv(CoreBinEnv); bin != "" {
		coreBin = bin
	}
	code := m.Run()
	// Every test removes what its installation holds when it ends; the
	// engine itself says whether anything was left (Track).
	left, err := engineLeftovers()
	if err != nil {
		fmt.Fprintln(os.Stderr, "check the test engine for leftovers:", err)
		return 1
	}
	for _, l := range left {
		fmt.Fprintln(os.Stderr, "the suite left on the test engine:", l)
	}
	if len(left) > 0 {
		return 1
	}
	return code
}

// berthctlBin is the berthctl binary RunWithBerthctl built.
var berthctlBin string

// RunWithBerthctl is Run for the suites that also drive berthctl as an
// operator does: it builds berthctl first (BerthctlBin).
func RunWithBerthctl(m *testing.M) int {
	dir, err := os.MkdirTemp("", "berthctl-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	berthctlBin = filepath.Join(dir, "berthctl")
	build := exec.Command("go", "build", "-o", berthctlBin, "berth.dev/core/cmd/berthctl")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build berthctl:", err)
		return 1
	}
	return Run(m)
}

// BerthctlBin is the path of the berthctl binary RunWithBerthctl built.
func BerthctlBin() string { return berthctlBin }

// NodeAgentBin is the path of the berth-nodeagent binary built by Main.
func NodeAgentBin() string { return nodeAgentBin }

// CoreBin is the path of the berth-core binary built by Main.
func CoreBin() string { return coreBin }

// RepoRoot is the repository's root folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// DataRaces returns the race detector's reports found in logs (empty
// without the race detector): a process built with -race writes one to
// its standard error for each data race it sees and goes on running.
func DataRaces(logs ...string) []string {
	var out []string
	for _, l := range logs {
		for {
			i := strings.Index(l, "WARNING: DATA RACE")
			if i < 0 {
				break
			}
			l = l[i:]
			end := strings.Index(l, "==================")
			if end < 0 {
				end = len(l)
			}
			out = append(out, l[:min(end, 4000)])
			l = l[len("WARNING: DATA RACE"):]
		}
	}
	return out
}
