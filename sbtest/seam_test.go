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
// constant that a server file declares, but seam.go the interfaces of wire_model.go its
// adapters implement.
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
		if file(id.Pos()) == "seam.go" && file(obj.Pos()) == "wire_model.go" {
			continue // the adapters implement the server's interfaces
		}
		if obj != nil && obj.Pkg() == pkg && isServer(obj.Pos()) {
			t.Errorf("%s: %s is the server's (declared in %s)", fset.Position(id.Pos()), obj.Name(), file(obj.Pos()))
		}
	}
	if model == 0 || server == 0 {
		t.Fatalf("%d names used in model files and %d in server files: the test no longer sees the layout", model, server)
	}
}

// TestServerUsesModelThroughSeam keeps the other side of the seam of seam.go: a server
// file (wire_*.go) names no function, method, type, field, variable or constant a model
// file declares (seam.go's adapters included), but through the interfaces of
// wire_model.go. wire_server.go, which makes the Server of a Namespace, and the
// adapters of the administration API and the explorer (wire_admin.go, wire_explorer.go)
// are the model's side.
func TestServerUsesModelThroughSeam(t *testing.T) {
	fset, _, info, pkg := checkPackage(t)
	file := func(p token.Pos) string { return filepath.Base(fset.Position(p).Filename) }
	isServer := func(p token.Pos) bool {
		switch f := file(p); f {
		case "wire_server.go", "wire_admin.go", "wire_explorer.go":
			return false
		default:
			return strings.HasPrefix(f, "wire_")
		}
	}
	isModel := func(obj types.Object) bool {
		return obj != nil && obj.Pkg() == pkg && obj.Parent() == pkg.Scope() || isField(obj, pkg)
	}
	used := 0
	for id, obj := range info.Uses {
		if !isServer(id.Pos()) || obj == nil || obj.Pkg() != pkg {
			continue
		}
		used++
		if isModel(obj) && !isServer(obj.Pos()) && !strings.HasPrefix(file(obj.Pos()), "wire_") {
			t.Errorf("%s: %s, declared in %s, is the model's: use it through wire_model.go's interfaces",
				fset.Position(id.Pos()), obj.Name(), file(obj.Pos()))
		}
	}
	if used == 0 {
		t.Fatal("no server file names the package's identifiers: the test no longer sees the layout")
	}
}

// isField reports whether obj is a field or method of a type of pkg.
func isField(obj types.Object, pkg *types.Package) bool {
	switch o := obj.(type) {
	case *types.Var:
		return o.IsField() && o.Pkg() == pkg
	case *types.Func:
		return o.Signature().Recv() != nil && o.Pkg() == pkg
	}
	return false
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
