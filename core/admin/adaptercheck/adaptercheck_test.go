package adaptercheck_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/core/admin/adaptercheck"
)

// adapters are core's gRPC adapters: every core/*admin package but the
// admin server itself, and core/enrollmentgrpc.
func adapters(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("../../*admin")
	if err != nil {
		t.Fatal(err)
	}
	dirs = slices.DeleteFunc(dirs, func(d string) bool { return filepath.Base(d) == "admin" })
	dirs = append(dirs, "../../enrollmentgrpc")
	// Guard against a glob that silently finds nothing.
	if len(dirs) < 6 {
		t.Fatalf("found %d adapters (%v), want at least 6", len(dirs), dirs)
	}
	return dirs
}

// TestAdaptersConform: every adapter of core follows the template.
func TestAdaptersConform(t *testing.T) {
	var all []string
	for _, dir := range adapters(t) {
		problems, err := adaptercheck.Check(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		all = append(all, problems...)
	}
	if len(all) > 0 {
		t.Fatalf("%d problems: adapters stray from the template (core/README.md, Adapter template):\n%s", len(all), strings.Join(all, "\n"))
	}
}

// TestCheckFindsStray: the check lists each way a deliberately stray
// adapter breaks the template, precisely, and nothing for a conforming
// one.
func TestCheckFindsStray(t *testing.T) {
	got, err := adaptercheck.Check("testdata/strayadmin")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"strayadmin: doc.go: declares more than the package",
		"strayadmin: doc.go: no package comment with its Rules:",
		"strayadmin: grpc.go is not a file of the template (doc.go, server.go, convert.go, pages.go)",
		"strayadmin: grpc.go: exported constructor NewThingServer (only New constructs)",
		"strayadmin: grpc.go: exported func Helper outside convert.go",
		"strayadmin: grpc.go: exported type Reader outside server.go",
		"strayadmin: grpc.go: exported var Registry",
		"strayadmin: grpc.go: page token scope scopeListThings outside pages.go",
		"strayadmin: no convert.go",
		"strayadmin: pages through admin.Paginate but has no pages.go",
		"strayadmin: server.go: New returns ThingServiceServer, not *Server or (*Server, error)",
		"strayadmin: server.go: Register is not func (s *Server) Register(g *grpc.Server)",
		"strayadmin: server.go: exported type Options is not what New takes",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stray adapter:\ngot\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}

	got, err = adaptercheck.Check("testdata/goodadmin")
	if err != nil || len(got) != 0 {
		t.Fatalf("conforming adapter: %v %q", err, got)
	}
}
