package main

import (
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// base is a repository of three modules shaped as RELEASING.md says: the core, a nested
// module requiring it, and one requiring both (as outbox/pgoutbox requires the core and
// dedupe/pgdedupe).
var base = map[string]string{
	"VERSION": "v0.1.0\n",
	"go.mod":  "module example.com/fix\n\ngo 1.26.0\n",
	"fix.go":  "package fix\n\nfunc Hello() string { return \"hello\" }\n",
	// Neither a command nor an internal package is importable by another module's user.
	"cmd/tool/main.go":      "package main\n\nfunc main() {}\n",
	"internal/x/x.go":       "package x\n",
	"testdata/t/t.go":       "package t\n",
	"fix_test.go":           "package fix\n",
	"a/go.mod":              "module example.com/fix/a\n\ngo 1.26.0\n\nrequire example.com/fix v0.1.0\n\nreplace example.com/fix => ..\n",
	"a/a.go":                "package a\n\nimport \"example.com/fix\"\n\nfunc A() string { return fix.Hello() }\n",
	"b/go.mod":              "module example.com/fix/b\n\ngo 1.26.0\n\nrequire (\n\texample.com/fix v0.1.0\n\texample.com/fix/a v0.1.0\n)\n\nreplace (\n\texample.com/fix => ..\n\texample.com/fix/a => ../a\n)\n",
	"b/b.go":                "package b\n\nimport \"example.com/fix/a\"\n\nfunc B() string { return a.A() }\n",
	"b/sub/sub.go":          "package sub\n\nimport _ \"example.com/fix/b/internal/y\"\n",
	"b/internal/y/y.go":     "package y\n", // a module's own internal package is its to use
	"tools/x/go.mod":        "module tools.example/x\n\ngo 1.26.0\n",
	"tools/x/x.go":          "package x\n",
	".ci/tool/go.mod":       "module example.com/fix/.ci\n",
	"other/testdata/go.mod": "module example.com/fix/other/testdata\n",
}

// newFixture writes base with changes (an empty value deletes a file) into a new git
// repository with one commit, and returns its directory.
func newFixture(t *testing.T, changes map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := maps.Clone(base)
	for name, content := range changes {
		if content == "" {
			delete(files, name)
		} else {
			files[name] = content
		}
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "fixture"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// simulate loads the fixture, writes the proxy and builds every module alone, as the
// release check does; it returns the static problems and the first build error. The
// upstream proxy is off: a fixture needs nothing but its own modules.
func simulate(t *testing.T, dir string) (*repo, []string, error) {
	t.Helper()
	r, err := loadRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	problems := r.checkModules()
	p, err := r.checkImports()
	if err != nil {
		t.Fatal(err)
	}
	problems = append(problems, p...)
	work := t.TempDir()
	proxy := filepath.Join(work, "proxy")
	if err := r.writeProxy(proxy); err != nil {
		t.Fatal(err)
	}
	u, err := newUser(work, proxy, r.Root, "off", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range r.Modules {
		if err := u.buildAlone(r, m, "alone"+string(rune('0'+i))); err != nil {
			return r, problems, err
		}
	}
	return r, problems, nil
}

// TestReleaseShape: the modules are found by their go.mod files (a tool's module, a
// testdata and a dot directory left out), tagged as Go expects, and each builds alone from
// the simulated release.
func TestReleaseShape(t *testing.T) {
	t.Parallel()
	r, problems, err := simulate(t, newFixture(t, nil))
	if len(problems) > 0 || err != nil {
		t.Fatalf("problems %q, build error %v", problems, err)
	}
	var tags, pkgs []string
	for _, m := range r.Modules {
		tags = append(tags, m.Tag(r.Version))
		pkgs = append(pkgs, m.Packages...)
	}
	if want := []string{"v0.1.0", "a/v0.1.0", "b/v0.1.0"}; !slices.Equal(tags, want) {
		t.Errorf("tags %q, want %q", tags, want)
	}
	if want := []string{"example.com/fix", "example.com/fix/a", "example.com/fix/b", "example.com/fix/b/sub"}; !slices.Equal(pkgs, want) {
		t.Errorf("importable packages %q, want %q", pkgs, want)
	}
}

// TestFailures: each way a release breaks for its users is found: by the go.mod rules, by
// the build from the simulated proxy, or by both.
func TestFailures(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		changes map[string]string
		problem string // a static problem that must be reported ("" for none)
		build   string // what the build error must mention ("" for a build that works)
	}{{
		// The shape this repository had: a user's go get fails on the replaced version.
		name:    "requirement only a replace satisfies",
		changes: map[string]string{"a/go.mod": "module example.com/fix/a\n\ngo 1.26.0\n\nrequire example.com/fix v0.0.0\n\nreplace example.com/fix => ../\n"},
		problem: "a/go.mod: requires example.com/fix v0.0.0; the release is v0.1.0",
		build:   "example.com/fix@v0.0.0",
	}, {
		// A go.work (or a replace) can hide a missing requirement from local builds.
		name:    "missing requirement of a sibling",
		changes: map[string]string{"b/go.mod": "module example.com/fix/b\n\ngo 1.26.0\n\nrequire example.com/fix v0.1.0\n\nreplace example.com/fix => ..\n"},
		build:   "example.com/fix/a",
	}, {
		// Local builds read the directory, the release only what git holds: a sibling that
		// needs an ignored (generated) file of the core does not build against the core it
		// requires.
		name: "nested module does not build against the core it requires",
		changes: map[string]string{
			".gitignore": "gen.go\n",
			"gen.go":     "package fix\n\nfunc Generated() string { return \"gen\" }\n",
			"a/a.go":     "package a\n\nimport \"example.com/fix\"\n\nfunc A() string { return fix.Generated() }\n",
		},
		build: "undefined: fix.Generated",
	}, {
		// Go allows the import by path (a sits below the internal directory's parent), and
		// the build works, until the core changes its internal package.
		name:    "import of another module's internal package",
		changes: map[string]string{"a/a.go": "package a\n\nimport (\n\t\"example.com/fix\"\n\t_ \"example.com/fix/internal/x\"\n)\n\nfunc A() string { return fix.Hello() }\n"},
		problem: "a/a.go: imports example.com/fix/internal/x, an internal package of module example.com/fix",
	}, {
		name:    "a test's import of another module's internal package",
		changes: map[string]string{"b/b_test.go": "package b\n\nimport _ \"example.com/fix/internal/x\"\n"},
		problem: "b/b_test.go: imports example.com/fix/internal/x, an internal package of module example.com/fix",
	}, {
		name:    "sibling required at an older version",
		changes: map[string]string{"b/go.mod": "module example.com/fix/b\n\ngo 1.26.0\n\nrequire (\n\texample.com/fix v0.1.0\n\texample.com/fix/a v0.0.9\n)\n\nreplace (\n\texample.com/fix => ..\n\texample.com/fix/a => ../a\n)\n"},
		problem: "b/go.mod: requires example.com/fix/a v0.0.9; the release is v0.1.0",
		build:   "example.com/fix/a",
	}, {
		name:    "replace of another module",
		changes: map[string]string{"a/go.mod": base["a/go.mod"] + "\nreplace example.com/other => ../../other\n"},
		problem: "a/go.mod: replace example.com/other => ../../other: a user's build ignores it",
	}, {
		name:    "exclude",
		changes: map[string]string{"a/go.mod": base["a/go.mod"] + "\nexclude example.com/other v1.0.0\n"},
		problem: "a/go.mod: exclude example.com/other v1.0.0: a user's build ignores it",
	}, {
		name:    "no local replace of a required sibling",
		changes: map[string]string{"a/go.mod": "module example.com/fix/a\n\ngo 1.26.0\n\nrequire example.com/fix v0.1.0\n"},
		problem: "a/go.mod: requires example.com/fix without `replace example.com/fix => ..`",
	}, {
		name:    "replace pointing elsewhere",
		changes: map[string]string{"a/go.mod": "module example.com/fix/a\n\ngo 1.26.0\n\nrequire example.com/fix v0.1.0\n\nreplace example.com/fix => ../b\n"},
		problem: "a/go.mod: replace example.com/fix => ../b: the module is in ..",
	}, {
		name:    "module path that is not its directory",
		changes: map[string]string{"a/go.mod": strings.Replace(base["a/go.mod"], "example.com/fix/a\n", "example.com/fix/aa\n", 1)},
		problem: "a/go.mod: module example.com/fix/aa in directory \"a\": the go command looks for it as example.com/fix/a",
		build:   "example.com/fix/a",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, problems, err := simulate(t, newFixture(t, tt.changes))
			text := strings.Join(problems, "\n")
			switch {
			case tt.problem == "" && text != "":
				t.Errorf("problems:\n%s\nwant none", text)
			case !strings.Contains(text, tt.problem):
				t.Errorf("problems:\n%s\nwant one containing %q", text, tt.problem)
			}
			switch {
			case tt.build == "" && err != nil:
				t.Errorf("build error %v, want none", err)
			case tt.build != "" && (err == nil || !strings.Contains(err.Error(), tt.build)):
				t.Errorf("build error %v, want one mentioning %q", err, tt.build)
			}
			t.Logf("problems:\n%s\nbuild: %v", text, err)
		})
	}
}

// TestFix: -fix turns the shape this repository had (v0.0.0 and a replace) into the
// release's, and adds a missing local replace; the result passes.
func TestFix(t *testing.T) {
	t.Parallel()
	dir := newFixture(t, map[string]string{
		"a/go.mod": "module example.com/fix/a\n\ngo 1.26.0\n\nrequire example.com/fix v0.0.0\n\nreplace example.com/fix => ../\n",
		"b/go.mod": "module example.com/fix/b\n\ngo 1.26.0\n\nrequire (\n\texample.com/fix v0.0.0\n\texample.com/fix/a v0.0.0\n)\n\nreplace example.com/fix => ..\n",
	})
	r, err := loadRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := r.fix()
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(changed)); !slices.Equal(got, []string{"a/go.mod", "b/go.mod"}) {
		t.Fatalf("fix changed %q, want a/go.mod and b/go.mod", got)
	}
	for name, data := range changed {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, problems, err := simulate(t, dir); len(problems) > 0 || err != nil {
		t.Errorf("after fix: problems %q, build error %v\nb/go.mod:\n%s", problems, err, changed["b/go.mod"])
	}
}

// TestVersionFile: VERSION must be a canonical v0 or v1 semantic version.
func TestVersionFile(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{
		"v0.1.0\n":    "",
		"v1.2.3-rc.1": "",
		"0.1.0":       "not a canonical semantic version",
		"v0.1":        "not a canonical semantic version",
		"v2.0.0":      "needs module paths ending in /v2",
		"":            "not a canonical semantic version",
	} {
		file := filepath.Join(t.TempDir(), "VERSION")
		if err := os.WriteFile(file, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readVersion(file)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("readVersion(%q) = %v, want %q", v, err, want)
		}
	}
}

// TestCommandModuleInstalls: a nested module with a main package in its directory (as
// cmd/sbctl) is released with a go.mod without its siblings' replace lines, so that go
// install path@version, which refuses a module whose go.mod has them, installs it.
func TestCommandModuleInstalls(t *testing.T) {
	t.Parallel()
	dir := newFixture(t, map[string]string{
		"c/go.mod":  "module example.com/fix/c\n\ngo 1.26.0\n\nrequire example.com/fix v0.1.0\n\n// Builds in this repository use the core's directory.\nreplace example.com/fix => ..\n",
		"c/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/fix\"\n)\n\nfunc main() { fmt.Println(fix.Hello()) }\n",
	})
	r, problems, err := simulate(t, dir)
	if len(problems) > 0 || err != nil {
		t.Fatalf("problems %q, build error %v", problems, err)
	}
	c := r.module("example.com/fix/c")
	if !c.Command || strings.Contains(string(c.Released), "replace") || len(c.ReleasedFile.Require) != 1 {
		t.Fatalf("command module: Command %v, released go.mod:\n%s", c.Command, c.Released)
	}
	if a := r.module("example.com/fix/a"); a.Command || string(a.Released) != string(a.GoMod) {
		t.Errorf("library module a: Command %v, released go.mod changed:\n%s", a.Command, a.Released)
	}
	work := t.TempDir()
	proxy := filepath.Join(work, "proxy")
	if err := r.writeProxy(proxy); err != nil {
		t.Fatal(err)
	}
	u, err := newUser(work, proxy, r.Root, "off", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(work, "bin")
	if err := u.install(bin, "example.com/fix/c@v0.1.0"); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(filepath.Join(bin, "c")); err != nil || out != "hello\n" {
		t.Fatalf("the installed command: %q, %v", out, err)
	}
}
