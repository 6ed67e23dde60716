package sbtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelRefersToNoServerName keeps the seam of seam.go: no model file (every
// non-test file but wire_*.go) names a function, type, variable or constant declared
// by the server's files, nor calls a method that only the server's files declare.
func TestModelRefersToNoServerName(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	server, model := map[string]*ast.File{}, map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// SkipObjectResolution is off: a file's Unresolved list holds the names it
		// takes from the package's other files (and the universe).
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(name, "wire_") {
			server[name] = f
		} else {
			model[name] = f
		}
	}
	if len(server) == 0 || len(model) == 0 {
		t.Fatalf("%d server and %d model files: the test no longer sees the layout", len(server), len(model))
	}
	serverDecls, serverMethods := declaredNames(server)
	_, modelMethods := declaredNames(model)
	for name, f := range model {
		for _, id := range f.Unresolved {
			if serverDecls[id.Name] {
				t.Errorf("%s: %s is the server's (declared in a wire_*.go file)", fset.Position(id.Pos()), id.Name)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && serverMethods[sel.Sel.Name] && !modelMethods[sel.Sel.Name] {
				t.Errorf("%s: %s calls .%s, a method only the server declares", fset.Position(sel.Pos()), name, sel.Sel.Name)
			}
			return true
		})
	}
}

// declaredNames returns the package-level names files declare, and the names of the
// methods and struct fields they declare.
func declaredNames(files map[string]*ast.File) (decls, members map[string]bool) {
	decls, members = map[string]bool{}, map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					members[d.Name.Name] = true
				} else {
					decls[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						decls[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								for _, n := range field.Names {
									members[n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							decls[n.Name] = true
						}
					}
				}
			}
		}
	}
	return decls, members
}
