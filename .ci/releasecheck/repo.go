package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// A repo is the repository being released: the files a commit of the working tree would
// hold, the version in its VERSION file and the modules it releases.
type repo struct {
	Dir     string   // absolute path of the repository's root
	Version string   // the content of VERSION: the version every module is released at
	Files   []string // slash-separated paths relative to Dir: tracked and untracked, not ignored
	Root    string   // the root module's path; every released module's path starts with it
	Modules []*mod

	sums []string // go.sum lines of the modules' zips, once writeProxy wrote them
}

// A mod is one released module: a go.mod whose module path is the root module's path
// or below it, outside the directories the go command ignores.
type mod struct {
	Dir      string // slash-separated, relative to the repository; "" for the root module
	Path     string // module path
	GoMod    []byte // go.mod as in the working tree
	File     *modfile.File
	Packages []string // import paths of the packages another module can import (not main, not internal)

	// Command is true for a nested module with a main package in its own directory: a
	// command users go install. go install pkg@version refuses a module whose go.mod has
	// replace directives, so its tag is on a commit of its own whose go.mod is Released.
	Command bool
	// Released is go.mod as the module's tag holds it: the module's .mod file in the
	// proxy and the go.mod of its zip. GoMod, except for a Command: without the replace
	// directives of its siblings.
	Released     []byte
	ReleasedFile *modfile.File
}

// Tag is the git tag that releases m at version: "v0.1.0" for the root module,
// "otel/v0.1.0" for the module in directory otel (Go Modules Reference, "Mapping versions
// to commits": a module in a subdirectory is tagged with the subdirectory as prefix).
func (m *mod) Tag(version string) string {
	if m.Dir == "" {
		return version
	}
	return m.Dir + "/" + version
}

// loadRepo reads the repository at dir: VERSION, the file list from git, and every
// released module with its importable packages.
func loadRepo(dir string) (*repo, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r := &repo{Dir: dir}
	if r.Version, err = readVersion(filepath.Join(dir, "VERSION")); err != nil {
		return nil, err
	}
	if r.Files, err = gitFiles(dir); err != nil {
		return nil, err
	}
	rootMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("the repository's root has no go.mod: %w", err)
	}
	if r.Root = modfile.ModulePath(rootMod); r.Root == "" {
		return nil, errors.New("go.mod: no module line")
	}
	for _, f := range r.Files {
		d, base := path.Split(f)
		d = strings.TrimSuffix(d, "/")
		if base != "go.mod" || ignoredDir(d) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(f, data, nil)
		if err != nil {
			return nil, err
		}
		if mf.Module == nil {
			return nil, fmt.Errorf("%s: no module line", f)
		}
		if p := mf.Module.Mod.Path; p != r.Root && !strings.HasPrefix(p, r.Root+"/") {
			continue // a tool's module, such as this program's: not released
		}
		r.Modules = append(r.Modules, &mod{Dir: d, Path: mf.Module.Mod.Path, GoMod: data, File: mf})
	}
	slices.SortFunc(r.Modules, func(a, b *mod) int { return strings.Compare(a.Dir, b.Dir) })
	for _, m := range r.Modules {
		if m.Packages, err = r.importable(m); err != nil {
			return nil, err
		}
		if m.Command, err = r.isCommand(m); err != nil {
			return nil, err
		}
		if err := r.release(m); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// isCommand reports whether m is a nested module with a main package in its own
// directory.
func (r *repo) isCommand(m *mod) (bool, error) {
	if m.Dir == "" {
		return false, nil
	}
	for _, f := range r.filesOf(m) {
		if strings.Contains(f, "/") || !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		src := filepath.Join(r.Dir, filepath.FromSlash(m.Dir), f)
		pf, err := parser.ParseFile(token.NewFileSet(), src, nil, parser.PackageClauseOnly)
		if err != nil {
			return false, err
		}
		return pf.Name.Name == "main", nil
	}
	return false, nil
}

// release sets m.Released: for a command, go.mod without its siblings' replace
// directives (as go mod edit -dropreplace writes it), otherwise go.mod as it is.
func (r *repo) release(m *mod) error {
	f, err := modfile.Parse(path.Join(m.Dir, "go.mod"), m.GoMod, nil)
	if err != nil {
		return err
	}
	if m.Command {
		for _, rep := range slices.Clone(f.Replace) {
			if r.module(rep.Old.Path) != nil {
				if err := f.DropReplace(rep.Old.Path, rep.Old.Version); err != nil {
					return err
				}
			}
		}
		f.Cleanup()
		if m.Released, err = f.Format(); err != nil {
			return err
		}
		f, err = modfile.Parse(path.Join(m.Dir, "go.mod"), m.Released, nil)
		if err != nil {
			return err
		}
	} else {
		m.Released = m.GoMod
	}
	m.ReleasedFile = f
	return nil
}

// readVersion reads and validates the VERSION file: a canonical semantic version of major
// version 0 or 1 (a v2 module needs a /v2 module path, which this layout does not have).
func readVersion(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("the version to release: %w", err)
	}
	v := strings.TrimSpace(string(data))
	if !semver.IsValid(v) || semver.Canonical(v) != v {
		return "", fmt.Errorf("VERSION: %q is not a canonical semantic version such as v0.1.0", v)
	}
	if m := semver.Major(v); m != "v0" && m != "v1" {
		return "", fmt.Errorf("VERSION: %s needs module paths ending in /%s; releasing them is not supported here", v, m)
	}
	return v, nil
}

// gitFiles lists what a commit of the working tree would hold: tracked files that still
// exist and untracked files that are not ignored. A module zip built from them matches the
// one the go command builds from a tag of that commit, so generated, ignored files never
// make a check pass.
func gitFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w: %s", dir, err, stderr.Bytes())
	}
	var files []string
	for f := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f))); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a symbolic link (never in a module zip)
		}
		files = append(files, f)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// ignoredDir reports whether the go command ignores directory d (slash-separated,
// relative) when it looks for packages: testdata, and names beginning with "." or "_".
func ignoredDir(d string) bool {
	if d == "" {
		return false
	}
	for e := range strings.SplitSeq(d, "/") {
		if e == "testdata" || strings.HasPrefix(e, ".") || strings.HasPrefix(e, "_") {
			return true
		}
	}
	return false
}

// filesOf returns m's files, relative to m's directory: the files below it that no
// other go.mod claims (a directory with a go.mod is another module, released or not, as
// golang.org/x/mod/zip leaves it out).
func (r *repo) filesOf(m *mod) []string {
	modDirs := map[string]bool{}
	for _, f := range r.Files {
		if d, base := path.Split(f); base == "go.mod" {
			modDirs[strings.TrimSuffix(d, "/")] = true
		}
	}
	var files []string
	for _, f := range r.Files {
		rel := f
		if m.Dir != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(f, m.Dir+"/"); !ok {
				continue
			}
		}
		owned := true
		for d := path.Dir(rel); d != "." && owned; d = path.Dir(d) {
			owned = !modDirs[path.Join(m.Dir, d)]
		}
		if owned {
			files = append(files, rel)
		}
	}
	return files
}

// importable returns the import paths of m's packages that another module can import:
// directories with non-test Go files whose package is not main, outside internal,
// testdata and ignored directories.
func (r *repo) importable(m *mod) ([]string, error) {
	seen := map[string]bool{}
	var pkgs []string
	for _, f := range r.filesOf(m) {
		d, base := path.Split(f)
		d = strings.TrimSuffix(d, "/")
		if !strings.HasSuffix(base, ".go") || strings.HasSuffix(base, "_test.go") || seen[d] || ignoredDir(d) {
			continue
		}
		if slices.Contains(strings.Split(d, "/"), "internal") {
			continue // importable only from the module's own tree
		}
		src := filepath.Join(r.Dir, filepath.FromSlash(m.Dir), filepath.FromSlash(f))
		pf, err := parser.ParseFile(token.NewFileSet(), src, nil, parser.PackageClauseOnly)
		if err != nil {
			return nil, err
		}
		seen[d] = true
		if pf.Name.Name == "main" {
			continue
		}
		pkgs = append(pkgs, path.Join(m.Path, d))
	}
	slices.Sort(pkgs)
	return pkgs, nil
}

// module returns the released module with path p, or nil.
func (r *repo) module(p string) *mod {
	for _, m := range r.Modules {
		if m.Path == p {
			return m
		}
	}
	return nil
}

// goVersion returns the highest go line of the released modules (at least 1.21.0, the
// first with a three-part go line).
func (r *repo) goVersion() string {
	v := "1.21.0"
	for _, m := range r.Modules {
		if m.File.Go != nil && semver.Compare("v"+m.File.Go.Version, "v"+v) > 0 {
			v = m.File.Go.Version
		}
	}
	return v
}
