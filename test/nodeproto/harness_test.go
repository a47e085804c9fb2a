package nodeproto

import (
	"testing"

	"berth.dev/test/internal/stack"
)

// TestMain builds berth-core and berth-nodeagent once for the package.
func TestMain(m *testing.M) { stack.Main(m) }
