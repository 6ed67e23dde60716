package sbkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHookConventions keeps one rule for the hooks of every package, nested modules
// included (the root package's documentation, "Conventions"): every hook interface
// <Name>Hook has its adapter <Name>HookFunc in the same package, and a hook's recovered
// panic is logged under the hook interface's name (the name argument of a call that runs
// hooks of type <Name>Hook is "<Name>Hook").
func TestHookConventions(t *testing.T) {
	type pkgTypes struct{ hooks, funcs map[string]token.Position }
	pkgs := map[string]*pkgTypes{}
	fset := token.NewFileSet()
	calls := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if pkgs[dir] == nil {
			pkgs[dir] = &pkgTypes{hooks: map[string]token.Position{}, funcs: map[string]token.Position{}}
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				name := ts.Name.Name
				switch ts.Type.(type) {
				case *ast.InterfaceType:
					if ast.IsExported(name) && strings.HasSuffix(name, "Hook") {
						pkgs[dir].hooks[name] = fset.Position(ts.Pos())
					}
				case *ast.FuncType:
					if strings.HasSuffix(name, "HookFunc") {
						pkgs[dir].funcs[name] = fset.Position(ts.Pos())
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			hook, name, pos := hookCall(call)
			if hook == "" {
				return true
			}
			calls++
			if name != hook {
				t.Errorf("%s: hooks of type %s run under the name %q: log a hook's panic under its interface's name, %q", fset.Position(pos), hook, name, hook)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hooks := 0
	for _, p := range pkgs {
		for h, pos := range p.hooks {
			hooks++
			if _, ok := p.funcs[h+"Func"]; !ok {
				t.Errorf("%s: hook %s has no adapter %sFunc", pos, h, h)
			}
		}
		for fn, pos := range p.funcs {
			if _, ok := p.hooks[strings.TrimSuffix(fn, "Func")]; !ok {
				t.Errorf("%s: %s adapts no hook interface of its package", pos, fn)
			}
		}
	}
	if hooks == 0 || calls == 0 {
		t.Fatalf("%d hook interfaces and %d calls that run hooks: the test no longer sees them", hooks, calls)
	}
}

// hookCall recognises a call that runs hooks: its last argument is a function literal
// taking one hook (a parameter whose type's name ends in Hook), and the string literal
// argument before it names the hooks in the log. It returns the hook type's name, that
// string and the string's position, or "" when call is not one.
func hookCall(call *ast.CallExpr) (hook, name string, pos token.Pos) {
	if len(call.Args) < 2 {
		return "", "", 0
	}
	lit, ok := call.Args[len(call.Args)-1].(*ast.FuncLit)
	if !ok || len(lit.Type.Params.List) != 1 {
		return "", "", 0
	}
	id, ok := lit.Type.Params.List[0].Type.(*ast.Ident)
	if !ok || !strings.HasSuffix(id.Name, "Hook") {
		return "", "", 0
	}
	for i := len(call.Args) - 2; i >= 0; i-- {
		if bl, ok := call.Args[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
			s, _ := strconv.Unquote(bl.Value)
			return id.Name, s, bl.Pos()
		}
	}
	return id.Name, "", call.Pos()
}
