package suspension_test

import (
	"strings"
	"testing"

	"berth.dev/core/internal/writers"
	"berth.dev/core/suspension"
)

// TestOneWriterOfComputePhase fails when a package of the core module
// other than core/suspension (core/store and tests aside) calls one of the
// store's suspension writes, directly or through an interface it declares.
func TestOneWriterOfComputePhase(t *testing.T) {
	callers, err := writers.Callers("berth.dev/core/suspension", suspension.Writes)
	if err != nil {
		t.Fatal(err)
	}
	// The check sees calls: with no package allowed, this one's own are
	// reported.
	own, err := writers.Callers("", suspension.Writes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(own, "\n"), "berth.dev/core/suspension: suspension.go:") {
		t.Fatalf("the check found none of core/suspension's own store writes: %q", own)
	}
	if len(callers) > 0 {
		t.Fatalf("compute-phase state has one writer, core/suspension; these call its store writes:\n%s",
			strings.Join(callers, "\n"))
	}
}
