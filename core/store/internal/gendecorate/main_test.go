package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedIsFresh: the committed storeobs/zz_generated.go is what
// the generator writes for the store as it is now; a method added to a
// view, or a signature changed, fails here until `go generate` runs in
// core/store (make verify-generated checks the same).
func TestGeneratedIsFresh(t *testing.T) {
	want, err := Generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../storeobs/zz_generated.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("core/store/storeobs/zz_generated.go is stale: run `go generate` in core/store and commit")
	}
}
