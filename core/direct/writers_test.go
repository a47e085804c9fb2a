package direct_test

import (
	"strings"
	"testing"

	"berth.dev/core/direct"
	"berth.dev/core/internal/writers"
)

// TestOneWriterOfDirectReadiness fails when a package of the core module
// other than core/direct (core/store and tests aside) records a direct
// generation's readiness.
func TestOneWriterOfDirectReadiness(t *testing.T) {
	callers, err := writers.Callers("berth.dev/core/direct", direct.Writes)
	if err != nil {
		t.Fatal(err)
	}
	own, err := writers.Callers("", direct.Writes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(own, "\n"), "berth.dev/core/direct: set.go:") {
		t.Fatalf("the check found none of core/direct's own readiness writes: %q", own)
	}
	if len(callers) > 0 {
		t.Fatalf("direct readiness has one writer, core/direct; these record it:\n%s", strings.Join(callers, "\n"))
	}
}
