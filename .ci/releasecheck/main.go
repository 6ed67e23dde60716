// Command releasecheck simulates a release of every module of the repository at the
// version in its VERSION file, and uses the result as a new user would (RELEASING.md).
//
// It finds the released modules (every go.mod whose module path is the root module's or
// below it), checks their go.mod files, that no module imports another's internal
// packages, the CHANGELOG's section and the README's Install block, then writes each module's zip with golang.org/x/mod/zip into a file-system module
// proxy and, in new modules outside the repository with GOWORK=off and only that proxy
// and the usual ones:
//
//   - gets and builds each module alone (go build -mod=readonly);
//   - runs the README's go get lines, gets every module at the version, and builds and
//     runs a program that imports every package of every module and sends and receives a
//     message through sbkit's sender and processor on sbtest;
//   - installs cmd/sbemulator with go install ...@version (and the README's go install
//     line), checks -version, starts it, runs the same program against it over AMQP and
//     stops it with SIGTERM.
//   - installs every command module (a nested module with a main package in its own
//     directory, cmd/sbctl) with go install ...@version, from a zip whose go.mod has no
//     replace lines as its tag's commit holds it, and checks its version command.
//
// Usage, from the repository's root:
//
//	.ci/release-check          # the check (CI runs it)
//	.ci/release-check -fix     # require every sibling module at VERSION, with the local replaces
//	.ci/release-check -tags    # print the git tags of the release
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	repoDir := flag.String("repo", ".", "the repository's root `directory`")
	fix := flag.Bool("fix", false, "rewrite the go.mod files: every sibling module required at VERSION, replaced by its directory")
	tags := flag.Bool("tags", false, "print the release's git tag commands and exit")
	keep := flag.Bool("keep", false, "keep the work directory (proxy, module cache, user modules) and print its path")
	verbose := flag.Bool("v", false, "print every go command with its duration")
	flag.Parse()
	if err := run(*repoDir, *fix, *tags, *keep, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "release-check:", err)
		os.Exit(1)
	}
}

func run(repoDir string, fix, tags, keep, verbose bool) error {
	r, err := loadRepo(repoDir)
	if err != nil {
		return err
	}
	switch {
	case fix:
		changed, err := r.fix()
		if err != nil {
			return err
		}
		for name, data := range changed {
			if err := os.WriteFile(filepath.Join(r.Dir, filepath.FromSlash(name)), data, 0o644); err != nil {
				return err
			}
			fmt.Println("rewrote", name)
		}
		return nil
	case tags:
		printTags(os.Stdout, r)
		return nil
	}
	var log io.Writer = io.Discard
	if verbose {
		log = os.Stdout
	}
	return check(r, keep, log)
}

// check runs the static checks, then the simulated release.
func check(r *repo, keep bool, verbose io.Writer) error {
	start := time.Now()
	var paths []string
	for _, m := range r.Modules {
		paths = append(paths, m.Tag(r.Version))
	}
	fmt.Printf("release-check: VERSION %s, modules tagged %s\n", r.Version, strings.Join(paths, " "))
	problems := r.checkModules()
	problems = append(problems, r.checkChangelog()...)
	cmds, p := r.readInstall()
	problems = append(problems, p...)
	p, err := r.checkImports()
	if err != nil {
		return err
	}
	problems = append(problems, p...)
	if len(problems) > 0 {
		return errors.New("\n\t" + strings.Join(problems, "\n\t"))
	}

	work, err := os.MkdirTemp("", "sbkit-release-check-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("release-check: work directory", work)
	} else {
		defer os.RemoveAll(work)
	}
	step := func(name string, f func() error) error {
		t := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("release-check: %s: ok (%.1fs)\n", name, time.Since(t).Seconds())
		return nil
	}
	proxy := filepath.Join(work, "proxy")
	if err := step("module zips in a file-system proxy", func() error { return r.writeProxy(proxy) }); err != nil {
		return err
	}
	u, err := newUser(work, proxy, r.Root, "", verbose)
	if err != nil {
		return err
	}
	for i, m := range r.Modules {
		if err := step(m.Path+"@"+r.Version+" alone, from its go.mod's requirements: go build -mod=readonly", func() error {
			return u.buildAlone(r, m, fmt.Sprintf("alone%d", i))
		}); err != nil {
			return err
		}
	}
	var smoke string
	if err := step("README's go get lines, every module, a program importing all, smoke test on sbtest", func() error {
		if smoke, err = u.buildTogether(r, cmds); err != nil {
			return err
		}
		out, err := runCmd(smoke)
		fmt.Fprint(verbose, "    smoke in memory: ", out)
		return err
	}); err != nil {
		return err
	}
	if err := step("go install "+r.emulator()+"@"+r.Version+" (and the README's go install), -version, start, smoke test over AMQP, SIGTERM", func() error {
		bin := filepath.Join(work, "bin")
		if err := u.install(bin, r.emulator()+"@"+r.Version); err != nil {
			return err
		}
		readmeBin := filepath.Join(work, "readme-bin")
		for _, args := range installArgs(cmds, "install") {
			if err := u.install(readmeBin, args...); err != nil {
				return fmt.Errorf("README.md Install: %w", err)
			}
		}
		for _, dir := range []string{bin, readmeBin} {
			if err := checkVersion(filepath.Join(dir, "sbemulator"), r.Version); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return runEmulator(ctx, filepath.Join(bin, "sbemulator"), smoke, verbose)
	}); err != nil {
		return err
	}
	for _, m := range r.Modules {
		if !m.Command {
			continue
		}
		if err := step("go install "+m.Path+"@"+r.Version+" (a command module: its tag's go.mod has no replace), "+path.Base(m.Path)+" version", func() error {
			bin := filepath.Join(work, "bin-"+path.Base(m.Path))
			if err := u.install(bin, m.Path+"@"+r.Version); err != nil {
				return err
			}
			out, err := runCmd(filepath.Join(bin, path.Base(m.Path)), "version")
			if err != nil {
				return err
			}
			if f := strings.Fields(out); len(f) < 2 || f[1] != r.Version {
				return fmt.Errorf("%s version printed %q, want the release, %s, second", path.Base(m.Path), strings.TrimSpace(out), r.Version)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	fmt.Printf("release-check: ok: every module at %s works for a new user (%.1fs)\n", r.Version, time.Since(start).Seconds())
	return nil
}

// runCmd runs a program and returns its combined output; the error quotes it.
func runCmd(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s", filepath.Base(name), err, indent(out))
	}
	return string(out), nil
}

// printTags prints the git commands that tag the release: one tag per module on the
// release commit, except for a command module (go install pkg@version refuses a go.mod
// with replace directives), whose tag is on a commit of its own, a child of the release
// commit that changes nothing but the replace lines of its go.mod (what the simulated
// release's zip of it holds).
func printTags(w io.Writer, r *repo) {
	var names []string
	for _, m := range r.Modules {
		if m.Command {
			continue
		}
		names = append(names, m.Tag(r.Version))
		fmt.Fprintln(w, "git tag", m.Tag(r.Version))
	}
	for _, m := range r.Modules {
		if !m.Command {
			continue
		}
		wt := "../sbkit-release-" + strings.ReplaceAll(m.Dir, "/", "-")
		var drops []string
		for _, rep := range m.File.Replace {
			if r.module(rep.Old.Path) != nil {
				drops = append(drops, "-dropreplace="+rep.Old.Path)
			}
		}
		fmt.Fprintf(w, "# %s: go install refuses its go.mod's replace lines; tag a commit without them\n", m.Path)
		fmt.Fprintln(w, "git worktree add --detach", wt, "HEAD")
		fmt.Fprintf(w, "go -C %s/%s mod edit %s\n", wt, m.Dir, strings.Join(drops, " "))
		fmt.Fprintf(w, "git -C %s commit -q -am %q\n", wt, "release: "+m.Dir+" "+r.Version+": go.mod without replace, for go install")
		fmt.Fprintf(w, "git -C %s tag %s\n", wt, m.Tag(r.Version))
		fmt.Fprintln(w, "git worktree remove", wt)
		names = append(names, m.Tag(r.Version))
	}
	fmt.Fprintln(w, "git push origin", strings.Join(names, " "))
}
