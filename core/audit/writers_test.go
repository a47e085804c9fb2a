package audit_test

import (
	"strings"
	"testing"

	"berth.dev/core/audit"
	"berth.dev/core/internal/writers"
)

// TestOneWriterOfAuditEvents fails when a package of the core module
// other than core/audit (core/store and tests aside) records or sweeps
// audit events, or makes a Provenance, directly or through an interface
// it declares.
func TestOneWriterOfAuditEvents(t *testing.T) {
	callers, err := writers.Callers("berth.dev/core/audit", audit.Writes)
	if err != nil {
		t.Fatal(err)
	}
	if len(callers) > 0 {
		t.Fatalf("the audit trail has one writer, core/audit; these call its store writes:\n%s", strings.Join(callers, "\n"))
	}
	own, err := writers.Callers("", audit.Writes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(own, "\n"), "berth.dev/core/audit: writer.go:") {
		t.Fatalf("the check found none of core/audit's own store writes: %q", own)
	}
}
