package sbkit_test

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInternalCopies: a nested module never imports the core's internal packages (they
// carry no compatibility promise across versions; .ci/release-check refuses such an
// import), so the modules that need one hold a copy in their own internal directory, under
// the same name: dedupe/pgdedupe/internal/retry is a copy of internal/retry. Every such
// copy is byte for byte the core's package, so that the modules of one release share one
// behaviour. Outside a clone of the repository (the core's module zip holds no nested
// module) there is nothing to compare.
func TestInternalCopies(t *testing.T) {
	var copies []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || path == "." {
			return nil
		}
		if d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if filepath.Base(filepath.Dir(path)) != "internal" || filepath.Dir(path) == "internal" {
			return nil
		}
		if _, err := os.Stat(filepath.Join("internal", d.Name())); err == nil && inNestedModule(path) {
			copies = append(copies, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(copies) == 0 {
		t.Skip("no nested module here: not a clone of the repository")
	}
	for _, want := range wantCopies {
		if !slices.Contains(copies, filepath.FromSlash(want)) {
			t.Errorf("%s not found: the module uses the core's package through its copy", want)
		}
	}
	for _, dir := range copies {
		orig := filepath.Join("internal", filepath.Base(dir))
		want, got := goFiles(t, orig), goFiles(t, dir)
		if w, g := slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)); !slices.Equal(w, g) {
			t.Errorf("%s holds %q, %s holds %q: copy the core's package over", dir, g, orig, w)
			continue
		}
		for name, data := range want {
			if !bytes.Equal(got[name], data) {
				t.Errorf("%s differs from %s: edit the core's and copy it over (cp %s/*.go %s/)", filepath.Join(dir, name), filepath.Join(orig, name), orig, dir)
			}
		}
	}
	t.Logf("copies of the core's internal packages: %q", copies)
}

// wantCopies are the copies the nested modules use, at the least: a copy the walk
// above missed would go unchecked.
var wantCopies = []string{
	"dedupe/pgdedupe/internal/hooks", "dedupe/pgdedupe/internal/retry",
	"outbox/pgoutbox/internal/hooks", "outbox/pgoutbox/internal/retry", "outbox/pgoutbox/internal/shutdown",
}

// inNestedModule reports whether dir (relative to the core's root) is inside a directory
// with a go.mod of its own.
func inNestedModule(dir string) bool {
	for d := filepath.Dir(dir); d != "."; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return true
		}
	}
	return false
}

// goFiles returns the .go files of dir by name.
func goFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = data
	}
	return files
}
