package adaptercheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// grpcPath is the import path of grpc-go, whose *grpc.Server Register
// takes.
const grpcPath = "google.golang.org/grpc"

// Files are the only non-test Go files an adapter may have, and whether
// each is required (pages.go only when the adapter pages).
var Files = map[string]bool{"doc.go": true, "server.go": true, "convert.go": true, "pages.go": false}

// Check returns every way the adapter package in dir strays from the
// template, one line each ("turnadmin: server.go: no func New"), sorted;
// none for a conforming adapter. An error is a directory it cannot read
// or parse.
func Check(dir string) ([]string, error) {
	a, err := load(dir)
	if err != nil {
		return nil, err
	}
	a.fileSet()
	a.doc()
	a.server()
	a.exported()
	a.pages()
	slices.Sort(a.problems)
	return a.problems, nil
}

// adapter is one package being checked.
type adapter struct {
	name     string
	files    map[string]*ast.File
	problems []string
}

func load(dir string) (*adapter, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	a := &adapter{name: filepath.Base(dir), files: map[string]*ast.File{}}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		a.files[n] = f
	}
	return a, nil
}

func (a *adapter) addf(format string, args ...any) {
	a.problems = append(a.problems, a.name+": "+fmt.Sprintf(format, args...))
}

// fileSet wants the template's files and no others.
func (a *adapter) fileSet() {
	for n, required := range Files {
		if _, ok := a.files[n]; required && !ok {
			a.addf("no %s", n)
		}
	}
	for n := range a.files {
		if _, ok := Files[n]; !ok {
			a.addf("%s is not a file of the template (doc.go, server.go, convert.go, pages.go)", n)
		}
	}
}

// doc wants doc.go to hold the package's rules and nothing else.
func (a *adapter) doc() {
	f, ok := a.files["doc.go"]
	if !ok {
		return
	}
	if f.Doc == nil || !strings.Contains(f.Doc.Text(), "Rules:") {
		a.addf("doc.go: no package comment with its Rules:")
	}
	if len(f.Decls) > 0 {
		a.addf("doc.go: declares more than the package")
	}
}

// server wants server.go to declare type Server, New returning *Server
// or (*Server, error), and (*Server).Register(*grpc.Server).
func (a *adapter) server() {
	f, ok := a.files["server.go"]
	if !ok {
		return
	}
	if typeSpec(f, "Server") == nil {
		a.addf("server.go: no type Server")
	}
	newFn := funcDecl(f, "", "New")
	switch {
	case newFn == nil:
		a.addf("server.go: no func New")
	case !newResults(newFn.Type.Results):
		a.addf("server.go: New returns %s, not *Server or (*Server, error)", fieldTypes(newFn.Type.Results))
	}
	reg := funcDecl(f, "Server", "Register")
	switch {
	case reg == nil:
		a.addf("server.go: no method (*Server) Register")
	case !registerSignature(f, reg):
		a.addf("server.go: Register is not func (s *Server) Register(g *grpc.Server)")
	}
}

// exported wants no exported constructor but New, exported functions
// (conversions the tests call) only in convert.go, no exported variable,
// and exported types other than Server only in server.go, as what New
// takes.
func (a *adapter) exported() {
	deps := a.newDependencies()
	for _, n := range sortedKeys(a.files) {
		for _, d := range a.files[n].Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				a.exportedFunc(n, d)
			case *ast.GenDecl:
				a.exportedGen(n, d, deps)
			}
		}
	}
}

func (a *adapter) exportedFunc(file string, d *ast.FuncDecl) {
	name := d.Name.Name
	if d.Recv != nil || !ast.IsExported(name) || (name == "New" && file == "server.go") {
		return
	}
	switch {
	case strings.HasPrefix(name, "New"):
		a.addf("%s: exported constructor %s (only New constructs)", file, name)
	case file != "convert.go":
		a.addf("%s: exported func %s outside convert.go", file, name)
	}
}

func (a *adapter) exportedGen(file string, d *ast.GenDecl, deps map[string]bool) {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if ast.IsExported(n.Name) && d.Tok == token.VAR {
					a.addf("%s: exported var %s", file, n.Name)
				}
			}
		case *ast.TypeSpec:
			n := s.Name.Name
			switch {
			case !ast.IsExported(n) || (n == "Server" && file == "server.go"):
			case n == "Server" || file != "server.go":
				a.addf("%s: exported type %s outside server.go", file, n)
			case !deps[n]:
				a.addf("server.go: exported type %s is not what New takes", n)
			}
		}
	}
}

// newDependencies are the names New's parameters use, and the names the
// declarations of server.go's types among them use in turn (a callback
// type's result type).
func (a *adapter) newDependencies() map[string]bool {
	deps := map[string]bool{}
	f, ok := a.files["server.go"]
	if !ok {
		return deps
	}
	newFn := funcDecl(f, "", "New")
	if newFn == nil {
		return deps
	}
	idents(newFn.Type.Params, deps)
	for changed := true; changed; {
		changed = false
		for n := range deps {
			if ts := typeSpec(f, n); ts != nil {
				before := len(deps)
				idents(ts.Type, deps)
				changed = changed || len(deps) != before
			}
		}
	}
	return deps
}

// pages wants an adapter that pages (admin.Paginate) to keep its page
// token scopes, the constants naming a berth method, in pages.go.
func (a *adapter) pages() {
	paginates := false
	for _, f := range a.files {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Paginate" {
				paginates = true
			}
			return true
		})
	}
	if _, ok := a.files["pages.go"]; paginates && !ok {
		a.addf("pages through admin.Paginate but has no pages.go")
	}
	for _, n := range sortedKeys(a.files) {
		if n == "pages.go" {
			continue
		}
		for _, c := range scopeConsts(a.files[n]) {
			a.addf("%s: page token scope %s outside pages.go", n, c)
		}
	}
}

// scopeConsts are f's constants whose value names a berth API method
// ("berth.admin.v1.TurnService/ListTurns"): page token scopes.
func scopeConsts(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "berth.") && strings.Contains(s, "/") {
					out = append(out, vs.Names[i].Name)
				}
			}
		}
	}
	return out
}

// funcDecl is f's function name, or with recv its method on *recv.
func funcDecl(f *ast.File, recv, name string) *ast.FuncDecl {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != name {
			continue
		}
		if recv == "" && fd.Recv == nil {
			return fd
		}
		if recv != "" && fd.Recv != nil && len(fd.Recv.List) == 1 && isPtrTo(fd.Recv.List[0].Type, recv) {
			return fd
		}
	}
	return nil
}

func typeSpec(f *ast.File, name string) *ast.TypeSpec {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			if ts := s.(*ast.TypeSpec); ts.Name.Name == name {
				return ts
			}
		}
	}
	return nil
}

// newResults reports whether New returns *Server or (*Server, error).
func newResults(r *ast.FieldList) bool {
	types := fieldList(r)
	switch len(types) {
	case 1:
		return isPtrTo(types[0], "Server")
	case 2:
		id, ok := types[1].(*ast.Ident)
		return isPtrTo(types[0], "Server") && ok && id.Name == "error"
	}
	return false
}

// registerSignature reports whether reg takes one *grpc.Server (grpc-go's,
// under whatever name f imports it) and returns nothing.
func registerSignature(f *ast.File, reg *ast.FuncDecl) bool {
	params := fieldList(reg.Type.Params)
	if len(params) != 1 || reg.Type.Results.NumFields() != 0 {
		return false
	}
	star, ok := params[0].(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Server" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && importName(f, grpcPath) == pkg.Name
}

// importName is the name f uses for the package at path ("" when f does
// not import it).
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// fieldList is the type of each value of l (a field "a, b int" counts
// twice).
func fieldList(l *ast.FieldList) []ast.Expr {
	if l == nil {
		return nil
	}
	var out []ast.Expr
	for _, f := range l.List {
		for range max(1, len(f.Names)) {
			out = append(out, f.Type)
		}
	}
	return out
}

func fieldTypes(l *ast.FieldList) string {
	var parts []string
	for _, t := range fieldList(l) {
		parts = append(parts, exprString(t))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

func isPtrTo(e ast.Expr, name string) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == name
}

// idents adds every identifier under n to into.
func idents(n ast.Node, into map[string]bool) {
	if n == nil {
		return
	}
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			into[id.Name] = true
		}
		return true
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
