package turns_test

import (
	"strings"
	"testing"

	"berth.dev/core/internal/writers"
	"berth.dev/core/turns"
)

// TestOneWriterOfTurnState fails when a package of the core module other
// than core/turns (core/store and tests aside) calls one of the store's
// Turn writes, directly or through an interface it declares. Terminal
// cleanup's settlement of Turns (store.Termination) is the documented
// exception (doc.go): it is part of the terminating transaction.
func TestOneWriterOfTurnState(t *testing.T) {
	callers, err := writers.Callers("berth.dev/core/turns", turns.Writes)
	if err != nil {
		t.Fatal(err)
	}
	if len(callers) > 0 {
		t.Fatalf("Turn state has one writer, core/turns; these call its store writes:\n%s", strings.Join(callers, "\n"))
	}
	own, err := writers.Callers("", turns.Writes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(own, "\n"), "berth.dev/core/turns: runtime.go:") {
		t.Fatalf("the check found none of core/turns' own store writes: %q", own)
	}
}
