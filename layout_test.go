package sbkit_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The core module's tree says what each package is for, and TestLayout keeps it true:
//
//   - runtime: what a user's program runs. The public packages (the root, sender,
//     receiver, locks, dedupe, serialize, reqreply, deadletter) and the helpers they
//     share, each a direct child of internal/ (retry, hooks, shutdown, workpool, heapq,
//     guid).
//   - internal/testing/...: code only tests and benchmarks use (the scenario suite, the
//     latency timer).
//   - internal/emulator/...: code only the emulator uses (sbtest, cmd/sbemulator).
//   - the test infrastructure users import in their tests: sbtest and dedupe/storetest,
//     and the commands under cmd/.
const (
	testOnlyDir = "internal/testing"
	emulatorDir = "internal/emulator"
)

// TestLayout: no runtime package imports sbtest, dedupe/storetest, a command, or code of
// internal/testing or internal/emulator; code of internal/testing is imported only by
// tests and by itself; code of internal/emulator only by sbtest, cmd/sbemulator,
// internal/testing and tests; and every runtime helper of internal/ is imported by a
// runtime package (one that only tests or the emulator use belongs under
// internal/testing or internal/emulator).
func TestLayout(t *testing.T) {
	const mod = "github.com/sbkit/sbkit"
	imports := coreImports(t, mod)
	if len(imports) == 0 {
		t.Fatal("no Go file found: the test no longer sees the layout")
	}
	usedByRuntime := map[string]bool{}
	for _, imp := range imports {
		switch {
		case under(imp.to, testOnlyDir) && !imp.test && !under(imp.from, testOnlyDir):
			t.Errorf("%s imports %s: test-only code, for _test.go files and %s only", imp.file, imp.to, testOnlyDir)
		case under(imp.to, emulatorDir) && !imp.test && !under(imp.from, "sbtest", "cmd/sbemulator", testOnlyDir, emulatorDir):
			t.Errorf("%s imports %s: the emulator's code, for sbtest and cmd/sbemulator only", imp.file, imp.to)
		}
		if imp.test || !runtimePkg(imp.from) {
			continue
		}
		if !runtimePkg(imp.to) {
			t.Errorf("%s imports %s: a runtime package imports only runtime packages and the helpers directly under internal/", imp.file, imp.to)
		}
		if imp.from != imp.to {
			usedByRuntime[imp.to] = true
		}
	}
	helpers, err := os.ReadDir("internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range helpers {
		dir := path.Join("internal", h.Name())
		if h.IsDir() && runtimePkg(dir) && !usedByRuntime[dir] {
			t.Errorf("%s is imported by no runtime package: move it under %s (tests only) or %s (the emulator only)", dir, testOnlyDir, emulatorDir)
		}
	}
}

// runtimePkg reports whether the package in dir (relative to the module's root) is one
// a user's program runs.
func runtimePkg(dir string) bool {
	return !under(dir, "sbtest", "dedupe/storetest", "cmd", testOnlyDir, emulatorDir)
}

// under reports whether dir is one of dirs or below one of them.
func under(dir string, dirs ...string) bool {
	for _, d := range dirs {
		if dir == d || strings.HasPrefix(dir, d+"/") {
			return true
		}
	}
	return false
}

// An edge is one import of a package of the module by a Go file of the module.
type edge struct {
	file     string // the importing file
	from, to string // package directories relative to the module's root ("." for the root)
	test     bool   // the file is a _test.go file
}

// coreImports returns the imports of the module's own packages by the module's Go files,
// outside nested modules, testdata and the directories the go command ignores.
func coreImports(t *testing.T, mod string) []edge {
	t.Helper()
	var edges []edge
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == "." {
				return nil
			}
			if n := d.Name(); n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		from := filepath.ToSlash(filepath.Dir(p))
		for _, s := range f.Imports {
			ip, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return err
			}
			var to string
			switch {
			case ip == mod:
				to = "."
			case strings.HasPrefix(ip, mod+"/"):
				to = strings.TrimPrefix(ip, mod+"/")
			default:
				continue
			}
			edges = append(edges, edge{file: filepath.ToSlash(p), from: from, to: to, test: strings.HasSuffix(p, "_test.go")})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return edges
}
