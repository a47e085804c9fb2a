package writers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// module is the core module's path; storePkg its store.
const (
	module   = "berth.dev/core"
	storePkg = module + "/store"
)

// listed is one package as `go list -json` reports it.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Module     *struct{ Path string }
}

// Callers returns, sorted, "package: file:line: method" for every
// selection of one of methods in a non-exempt package of the core module
// other than allowed (an import path).
func Callers(allowed string, methods []string) ([]string, error) {
	pkgs, err := list()
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	want := map[string]bool{}
	for _, m := range methods {
		want[m] = true
	}
	var found []string
	for _, p := range pkgs {
		if exempt(p, allowed) {
			continue
		}
		hits, err := check(fset, imp, p, want)
		if err != nil {
			return nil, err
		}
		found = append(found, hits...)
	}
	sort.Strings(found)
	return found, nil
}

// list runs `go list -export -deps -json` over the core module.
func list() ([]listed, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Module", module+"/...")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(&out)
	for {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
}

// exempt says whether p is outside the check: not of the core module, the
// allowed package, core/store and its subpackages, or a test helper.
func exempt(p listed, allowed string) bool {
	switch {
	case p.Module == nil || p.Module.Path != module:
		return true
	case p.ImportPath == allowed, p.ImportPath == storePkg, strings.HasPrefix(p.ImportPath, storePkg+"/"):
		return true
	}
	return strings.HasSuffix(p.ImportPath, "test")
}

// check type-checks p from source and returns its selections of wanted
// methods.
func check(fset *token.FileSet, imp types.Importer, p listed, want map[string]bool) ([]string, error) {
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
		return nil, fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	var hits []string
	for sel, s := range info.Selections {
		fn, ok := s.Obj().(*types.Func)
		if !ok || !want[fn.Name()] || !storeWrite(fn) {
			continue
		}
		pos := fset.Position(sel.Sel.Pos())
		hits = append(hits, fmt.Sprintf("%s: %s:%d: %s", p.ImportPath, filepath.Base(pos.Filename), pos.Line, fn.Name()))
	}
	return hits, nil
}

// storeWrite says whether fn is a store write as a caller reaches it: a
// method of a core/store type, or of an interface the core module declares.
func storeWrite(fn *types.Func) bool {
	if fn.Pkg() == nil {
		return false
	}
	path := fn.Pkg().Path()
	if path == storePkg || strings.HasPrefix(path, storePkg+"/") {
		return true
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return false
	}
	_, isInterface := recv.Type().Underlying().(*types.Interface)
	return isInterface && (path == module || strings.HasPrefix(path, module+"/"))
}
