package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// checkChangelog returns a problem unless CHANGELOG.md has a section for the release: a
// heading line "## <version>" (followed by the end of the line, a space or a colon).
func (r *repo) checkChangelog() []string {
	data, err := os.ReadFile(filepath.Join(r.Dir, "CHANGELOG.md"))
	if err != nil {
		return []string{err.Error()}
	}
	for line := range strings.Lines(string(data)) {
		rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "## "+r.Version)
		if ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
			return nil
		}
	}
	return []string{fmt.Sprintf("CHANGELOG.md: no section for %s (a heading line \"## %s ...\")", r.Version, r.Version)}
}

// An installCmd is one command of the README's Install block: "go get" or "go install"
// with module or package arguments, each path[@version].
type installCmd struct {
	Line string   // as written, without its comment
	Verb string   // "get" or "install"
	Args []string // path[@version]
}

// readInstall parses the first fenced code block after the README's "## Install" heading.
// Every line in it must be a go get or go install of this repository's paths: the release
// check runs exactly these commands as a new user would.
func (r *repo) readInstall() ([]installCmd, []string) {
	data, err := os.ReadFile(filepath.Join(r.Dir, "README.md"))
	if err != nil {
		return nil, []string{err.Error()}
	}
	var (
		cmds                     []installCmd
		problems                 []string
		inSection, inBlock, done bool
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() && !done {
		line := sc.Text()
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			inSection = line == "## Install"
		case inSection && strings.HasPrefix(line, "```"):
			done = inBlock
			inBlock = !inBlock
		case inSection && inBlock:
			text, _, _ := strings.Cut(line, "#")
			text = strings.TrimSpace(text)
			if text == "" {
				continue
			}
			f := strings.Fields(text)
			if len(f) < 3 || f[0] != "go" || (f[1] != "get" && f[1] != "install") {
				problems = append(problems, fmt.Sprintf("README.md Install: %q: only `go get` and `go install` lines are checked and allowed there", text))
				continue
			}
			c := installCmd{Line: text, Verb: f[1], Args: f[2:]}
			for _, a := range c.Args {
				if p := r.checkInstallArg(c.Verb, a); p != "" {
					problems = append(problems, fmt.Sprintf("README.md Install: %q: %s", text, p))
				}
			}
			cmds = append(cmds, c)
		}
	}
	if !done {
		return nil, append(problems, "README.md: no fenced code block under \"## Install\"")
	}
	return cmds, append(problems, r.installCovers(cmds)...)
}

// checkInstallArg says what is wrong with one argument of an Install command, or "".
func (r *repo) checkInstallArg(verb, arg string) string {
	p, v, hasV := strings.Cut(arg, "@")
	if strings.HasPrefix(p, "-") {
		return "flags are not checked; leave them out"
	}
	if p != r.Root && !strings.HasPrefix(p, r.Root+"/") {
		return p + " is not in this repository"
	}
	if hasV && v != "latest" && v != r.Version {
		return fmt.Sprintf("@%s: the release is %s; write @latest or @%s", v, r.Version, r.Version)
	}
	if verb == "install" && !hasV {
		return "go install outside a module needs @version (@latest)"
	}
	if m := r.moduleProviding(p); verb == "install" && m != nil && (len(m.ReleasedFile.Replace) > 0 || len(m.ReleasedFile.Exclude) > 0) {
		return fmt.Sprintf("go install %s@version refuses a module whose go.mod has replace or exclude directives (%s has): a command users install belongs in a module without them, or in a command module (a main package in the module's own directory, whose tag drops its siblings' replace lines)", p, path.Join(m.Dir, "go.mod"))
	}
	if verb == "get" && r.module(p) == nil {
		return p + " is not a module path of this repository"
	}
	return ""
}

// installCovers returns a problem for each module with importable packages that no
// go get line of the Install block names, and when the emulator is not installed.
func (r *repo) installCovers(cmds []installCmd) []string {
	named := map[string]bool{}
	for _, c := range cmds {
		for _, a := range c.Args {
			p, _, _ := strings.Cut(a, "@")
			named[c.Verb+" "+p] = true
		}
	}
	var problems []string
	for _, m := range r.Modules {
		if len(m.Packages) > 0 && !named["get "+m.Path] {
			problems = append(problems, fmt.Sprintf("README.md Install: no `go get %s` line (the module has packages a user imports)", m.Path))
		}
	}
	if !named["install "+r.emulator()] {
		problems = append(problems, fmt.Sprintf("README.md Install: no `go install %s@latest` line", r.emulator()))
	}
	return problems
}

// moduleProviding returns the released module whose path is the longest prefix of
// package path p, or nil.
func (r *repo) moduleProviding(p string) *mod {
	var best *mod
	for _, m := range r.Modules {
		if (p == m.Path || strings.HasPrefix(p, m.Path+"/")) && (best == nil || len(m.Path) > len(best.Path)) {
			best = m
		}
	}
	return best
}

// emulator is the import path of the command the release installs with go install.
func (r *repo) emulator() string { return r.Root + "/cmd/sbemulator" }

// installArgs returns the arguments of the Install block's commands of one verb.
func installArgs(cmds []installCmd, verb string) [][]string {
	var out [][]string
	for _, c := range cmds {
		if c.Verb == verb {
			out = append(out, slices.Clone(c.Args))
		}
	}
	return out
}
