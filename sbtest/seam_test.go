package sbtest

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestModelRefersToNoServerName keeps the seam of seam.go: no model file (every
// non-test file but wire_*.go) names a function, method, type, field, variable or
// constant that a server file declares.
func TestModelRefersToNoServerName(t *testing.T) {
	fset, _, info, pkg := checkPackage(t)
	file := func(p token.Pos) string { return filepath.Base(fset.Position(p).Filename) }
	isServer := func(p token.Pos) bool { return strings.HasPrefix(file(p), "wire_") }
	model, server := 0, 0
	for id, obj := range info.Uses {
		if isServer(id.Pos()) {
			server++
			continue
		}
		model++
		if obj != nil && obj.Pkg() == pkg && isServer(obj.Pos()) {
			t.Errorf("%s: %s is the server's (declared in %s)", fset.Position(id.Pos()), obj.Name(), file(obj.Pos()))
		}
	}
	if model == 0 || server == 0 {
		t.Fatalf("%d names used in model files and %d in server files: the test no longer sees the layout", model, server)
	}
}

// TestServerUsesModelThroughSeam keeps the other side of the seam of seam.go: a server
// file (wire_*.go) names an unexported function, method, type, field, variable or
// constant of a model file only when seam.go declares it or lists it, and every name
// seam.go lists is used by a server file (a stale entry widens the seam for nothing).
func TestServerUsesModelThroughSeam(t *testing.T) {
	fset, files, info, pkg := checkPackage(t)
	file := func(p token.Pos) string { return filepath.Base(fset.Position(p).Filename) }
	isServer := func(p token.Pos) bool { return strings.HasPrefix(file(p), "wire_") }
	isModel := func(obj types.Object) bool {
		return obj != nil && obj.Pkg() == pkg && !obj.Exported() && !isServer(obj.Pos()) && file(obj.Pos()) != "seam.go"
	}
	// The list is seam.go's blank variable.
	var list []ast.Node
	for _, f := range files {
		if file(f.Pos()) != "seam.go" {
			continue
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, spec := range g.Specs {
					if v := spec.(*ast.ValueSpec); len(v.Names) == 1 && v.Names[0].Name == "_" {
						list = append(list, v)
					}
				}
			}
		}
	}
	if len(list) != 1 {
		t.Fatalf("seam.go has %d blank variables, the test expects one: the list", len(list))
	}
	listed, used := map[types.Object]bool{}, map[types.Object]bool{}
	for id, obj := range info.Uses {
		if id.Pos() >= list[0].Pos() && id.End() <= list[0].End() && isModel(obj) {
			listed[obj] = true
		}
	}
	for id, obj := range info.Uses {
		if !isServer(id.Pos()) || !isModel(obj) {
			continue
		}
		used[obj] = true
		if !listed[obj] {
			t.Errorf("%s: %s, declared in %s, is the model's and not in the seam: declare or list it in seam.go, or use the exported API",
				fset.Position(id.Pos()), obj.Name(), file(obj.Pos()))
		}
	}
	for obj := range listed {
		if !used[obj] {
			t.Errorf("seam.go lists %s (%s), which no wire_*.go file uses", obj.Name(), fset.Position(obj.Pos()))
		}
	}
	if len(used) == 0 {
		t.Fatal("no server file uses a listed name: the test no longer sees the layout")
	}
}

// checkPackage type-checks the package's non-test files (those the build would
// compile), with its imports read from the export data `go list -export` builds.
func checkPackage(t *testing.T) (*token.FileSet, []*ast.File, *types.Info, *types.Package) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	imports := map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(".", name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for _, imp := range f.Imports {
			imports[strings.Trim(imp.Path.Value, `"`)] = true
		}
	}
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, slices.Sorted(maps.Keys(imports))...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if path, export, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok {
			exports[path] = export
		}
	}
	lookup := func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	pkg, err := conf.Check("github.com/sbkit/sbkit/sbtest", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	return fset, files, info, pkg
}
