package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// checkImports returns every import, in any module's Go files (tests included), of an
// internal package of another module of the repository. Go allows it by path when the
// importer sits below the internal directory's parent (dedupe/pgdedupe may import
// dedupe/internal/...), but an internal package carries no compatibility promise: the
// first change to it breaks the released versions of every other module that imports it,
// for each user who upgrades the module that holds it. A module uses the others' public
// API, or a copy of what it needs in an internal package of its own.
func (r *repo) checkImports() ([]string, error) {
	var problems []string
	for _, m := range r.Modules {
		for _, f := range r.filesOf(m) {
			d, base := path.Split(f)
			if !strings.HasSuffix(base, ".go") || ignoredDir(strings.TrimSuffix(d, "/")) {
				continue
			}
			src := filepath.Join(r.Dir, filepath.FromSlash(m.Dir), filepath.FromSlash(f))
			pf, err := parser.ParseFile(token.NewFileSet(), src, nil, parser.ImportsOnly)
			if err != nil {
				return nil, err
			}
			for _, imp := range pf.Imports {
				p, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", path.Join(m.Dir, f), err)
				}
				owner := r.owner(p)
				if owner == nil || owner == m {
					continue
				}
				rel := strings.TrimPrefix(strings.TrimPrefix(p, owner.Path), "/")
				if slices.Contains(strings.Split(rel, "/"), "internal") {
					problems = append(problems, fmt.Sprintf("%s: imports %s, an internal package of module %s: internal packages carry no compatibility promise across versions; use %s's public API, or copy what is needed into an internal package of %s", path.Join(m.Dir, f), p, owner.Path, owner.Path, m.Path))
				}
			}
		}
	}
	return problems, nil
}

// owner returns the released module that holds the package with import path p (the
// module with the longest path that is p or a prefix of it), or nil.
func (r *repo) owner(p string) *mod {
	var best *mod
	for _, m := range r.Modules {
		if (p == m.Path || strings.HasPrefix(p, m.Path+"/")) && (best == nil || len(m.Path) > len(best.Path)) {
			best = m
		}
	}
	return best
}
