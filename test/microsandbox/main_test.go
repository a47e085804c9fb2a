package microsandbox

import (
	"os"
	"testing"

	"berth.dev/sandbox/microsandbox/msbtest"

	"berth.dev/test/internal/stack"
)

// TestMain builds berthctl beside the binaries stack.Run builds, then runs
// the tests; it removes the fakemsb that msbtest builds for them.
func TestMain(m *testing.M) {
	code := stack.RunWithBerthctl(m)
	msbtest.Cleanup()
	os.Exit(code)
}
