package reset

import (
	"testing"

	"berth.dev/test/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }
