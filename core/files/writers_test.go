package files_test

import (
	"strings"
	"testing"

	"berth.dev/core/files"
	"berth.dev/core/internal/writers"
)

// TestOneWriterOfFileOperations fails when a package of the core module
// other than core/files (core/store and tests aside) calls one of the
// store's file operation writes, directly or through an interface it
// declares.
func TestOneWriterOfFileOperations(t *testing.T) {
	callers, err := writers.Callers("berth.dev/core/files", files.Writes)
	if err != nil {
		t.Fatal(err)
	}
	own, err := writers.Callers("", files.Writes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(own, "\n"), "berth.dev/core/files: files.go:") {
		t.Fatalf("the check found none of core/files' own store writes: %q", own)
	}
	if len(callers) > 0 {
		t.Fatalf("file_operations has one writer, core/files; these call its store writes:\n%s",
			strings.Join(callers, "\n"))
	}
}
