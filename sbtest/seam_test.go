package sbtest

import (
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyTheSeamImportsTheServer keeps the seam of seam.go on the model's side: the
// server (sbtest/internal/wire) cannot name the model, which the compiler enforces (sbtest
// imports it, so it cannot import sbtest), and of the model's files only server.go,
// which makes a Server of a Namespace, and seam.go, whose adapters show the model to
// the server, import it.
func TestOnlyTheSeamImportsTheServer(t *testing.T) {
	const wirePath = "github.com/sbkit/sbkit/sbtest/internal/wire"
	allowed := []string{"seam.go", "server.go"}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var importers []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(".", name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == wirePath {
				importers = append(importers, name)
			}
		}
	}
	for _, name := range importers {
		if !slices.Contains(allowed, name) {
			t.Errorf("%s imports the server (%s): only %v may; use the model's API, or add an adapter to seam.go", name, wirePath, allowed)
		}
	}
	for _, name := range allowed {
		if !slices.Contains(importers, name) {
			t.Errorf("%s does not import the server: the test no longer sees the layout", name)
		}
	}
}
