package main

import (
	"fmt"
	"path"
	"strings"

	"golang.org/x/mod/modfile"
)

// checkModules returns what in the modules' go.mod files a release cannot work with, one
// problem a line. The modules are released together at one version (RELEASING.md): each
// requires its siblings at exactly that version, and builds from them locally through a
// replace by directory, which Go applies only in the main module, so a user never needs it.
func (r *repo) checkModules() []string {
	var problems []string
	add := func(m *mod, format string, args ...any) {
		problems = append(problems, path.Join(m.Dir, "go.mod")+": "+fmt.Sprintf(format, args...))
	}
	for _, m := range r.Modules {
		if want := path.Join(r.Root, m.Dir); m.Path != want {
			add(m, "module %s in directory %q: the go command looks for it as %s (tag %s)", m.Path, m.Dir, want, m.Tag(r.Version))
		}
		if m.File.Go == nil {
			add(m, "no go directive")
		}
		replaced := map[string]bool{}
		for _, rep := range m.File.Replace {
			sib := r.module(rep.Old.Path)
			switch {
			case sib == nil:
				add(m, "replace %s => %s: a user's build ignores it (Go applies replace only in the main module); require a published version instead", rep.Old.Path, rep.New.Path)
			case rep.Old.Version != "" || rep.New.Version != "":
				add(m, "replace %s: replace a sibling module by its directory only (%s), for local builds", rep.Old.Path, relDir(m, sib))
			case !modfile.IsDirectoryPath(rep.New.Path) || path.Clean(rep.New.Path) != path.Clean(relDir(m, sib)):
				add(m, "replace %s => %s: the module is in %s", rep.Old.Path, rep.New.Path, relDir(m, sib))
			}
			replaced[rep.Old.Path] = true
		}
		for _, ex := range m.File.Exclude {
			add(m, "exclude %s %s: a user's build ignores it (Go applies exclude only in the main module)", ex.Mod.Path, ex.Mod.Version)
		}
		for _, req := range m.File.Require {
			p := req.Mod.Path
			if p != r.Root && !strings.HasPrefix(p, r.Root+"/") {
				continue
			}
			sib := r.module(p)
			if sib == nil {
				add(m, "requires %s, which is not a module of this repository", p)
				continue
			}
			if req.Mod.Version != r.Version {
				add(m, "requires %s %s; the release is %s (VERSION), and a user resolves the requirement as written: run .ci/release-check -fix", p, req.Mod.Version, r.Version)
			}
			if !replaced[p] {
				add(m, "requires %s without `replace %s => %s`: local builds would use the published %s instead of the tree (run .ci/release-check -fix)", p, p, relDir(m, sib), req.Mod.Version)
			}
		}
	}
	return problems
}

// relDir is the directory of sibling relative to m's, as a replace directive names it.
func relDir(m, sibling *mod) string {
	up := 0
	if m.Dir != "" {
		up = strings.Count(m.Dir, "/") + 1
	}
	rel := strings.Repeat("../", up)
	if sibling.Dir != "" {
		rel += sibling.Dir
	}
	rel = strings.TrimSuffix(rel, "/")
	if rel == "" {
		return "."
	}
	if !strings.HasPrefix(rel, ".") {
		rel = "./" + rel
	}
	return rel
}

// fix rewrites every module's requirements of its siblings to the release's version and
// adds the replace directives local builds need, and returns the go.mod files it changed.
func (r *repo) fix() (map[string][]byte, error) {
	changed := map[string][]byte{}
	for _, m := range r.Modules {
		f := m.File
		replaced := map[string]bool{}
		for _, rep := range f.Replace {
			replaced[rep.Old.Path] = true
		}
		for _, req := range f.Require {
			sib := r.module(req.Mod.Path)
			if sib == nil {
				continue
			}
			if req.Mod.Version != r.Version {
				if err := f.AddRequire(req.Mod.Path, r.Version); err != nil {
					return nil, err
				}
			}
			if !replaced[req.Mod.Path] {
				if err := f.AddReplace(req.Mod.Path, "", relDir(m, sib), ""); err != nil {
					return nil, err
				}
				replaced[req.Mod.Path] = true
			}
		}
		f.Cleanup()
		out, err := f.Format()
		if err != nil {
			return nil, err
		}
		if string(out) != string(m.GoMod) {
			changed[path.Join(m.Dir, "go.mod")] = out
		}
	}
	return changed, nil
}
