package nodewire

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyWirePackagesImportProto: in the platform module only the wire
// mappings (this package for the node protocol, enrollwire for
// enrollment's errors: packages named *wire) import berth.dev/proto; the
// codec, node TLS and telemetry stay protocol-free (and the sandbox module
// never imports it: depguard's sandbox-lean rule).
func TestOnlyWirePackagesImportProto(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == here || (path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || strings.HasSuffix(d.Name(), "wire"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "berth.dev/proto" || strings.HasPrefix(p, "berth.dev/proto/") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s; only the platform/*wire packages may", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
