package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// smokeMain is the user program's main.go: it sends and receives a message through sbkit's
// sender and processor. It lives in testdata so that this module does not build it.
//
//go:embed testdata/smoke/main.go
var smokeMain []byte

// A user runs the go command as someone who has never seen the repository: in a new
// module outside it, with no go.work and no replace, the repository's modules coming from
// the simulated release's proxy and everything else from the usual proxies.
type user struct {
	work    string   // the check's directory: proxy, module cache, user modules, binaries
	env     []string // the go command's environment
	verbose io.Writer
}

// newUser prepares the environment for the modules under root served from proxyDir.
// Other modules come first from the local module cache's download directory (itself a
// file-system proxy), then from upstream (the GOPROXY already configured when ""), so a
// warm machine needs no network. The module cache is a new one under work, so that no
// earlier run's zip of the same version is reused (-modcacherw lets the work directory be
// removed); -trimpath keeps compiled packages independent of its path, so the build cache
// still serves them from run to run.
func newUser(work, proxyDir, root, upstream string, verbose io.Writer) (*user, error) {
	out, err := exec.Command("go", "env", "-json", "GOPROXY", "GOMODCACHE", "GONOSUMDB").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	var ambient struct{ GOPROXY, GOMODCACHE, GONOSUMDB string }
	if err := json.Unmarshal(out, &ambient); err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	proxies := []string{fileURL(proxyDir), fileURL(filepath.Join(ambient.GOMODCACHE, "cache", "download"))}
	if upstream == "" {
		upstream = ambient.GOPROXY
	}
	if upstream != "" && upstream != "off" {
		proxies = append(proxies, upstream)
	}
	nosum := root
	if ambient.GONOSUMDB != "" {
		nosum += "," + ambient.GONOSUMDB
	}
	set := map[string]string{
		"GOWORK":      "off",
		"GO111MODULE": "on",
		"GOFLAGS":     "-mod=mod -modcacherw -trimpath",
		"GOPROXY":     strings.Join(proxies, ","),
		"GONOSUMDB":   nosum, // the simulated release is in no checksum database
		"GOMODCACHE":  filepath.Join(work, "modcache"),
		"GOBIN":       filepath.Join(work, "bin"),
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !hasKey(set, k) {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return &user{work: work, env: env, verbose: verbose}, nil
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// goCmd runs the go command in dir with extra environment entries and returns its
// combined output; the error quotes the command and its output.
func (u *user) goCmd(dir string, extra []string, args ...string) (string, error) {
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(slices.Clone(u.env), extra...)
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(u.verbose, "    (%s) go %s [%.1fs]\n", filepath.Base(dir), strings.Join(args, " "), time.Since(start).Seconds())
	if err != nil {
		return string(out), fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, indent(out))
	}
	return string(out), nil
}

func indent(b []byte) string {
	s := strings.TrimRight(string(b), "\n")
	return "\t" + strings.ReplaceAll(s, "\n", "\n\t")
}

// newModule creates a module named example.com/user in work/name that requires
// requirements (path@version), with a go.sum holding the checksums of the repository's
// go.sum files (the checksum database's, for every module the repository uses) and of
// the simulated release.
func (u *user) newModule(r *repo, name string, requirements ...string) (string, error) {
	dir := filepath.Join(u.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := u.goCmd(dir, nil, "mod", "init", "example.com/user"); err != nil {
		return "", err
	}
	// go get raises the go line to the modules' own; a module made with -mod=readonly in
	// mind must say it first (go mod init may write an older one).
	if _, err := u.goCmd(dir, nil, "mod", "edit", "-go="+r.goVersion()); err != nil {
		return "", err
	}
	for _, req := range requirements {
		if _, err := u.goCmd(dir, nil, "mod", "edit", "-require="+req); err != nil {
			return "", err
		}
	}
	sums, err := r.goSums()
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644)
}

// goSums returns the lines of every released module's go.sum and of the simulated
// release's, sorted and once each.
func (r *repo) goSums() ([]byte, error) {
	lines := slices.Clone(r.sums)
	for _, m := range r.Modules {
		data, err := os.ReadFile(filepath.Join(r.Dir, filepath.FromSlash(m.Dir), "go.sum"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(data)), "\n")...)
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	return []byte(strings.TrimSpace(strings.Join(lines, "\n")) + "\n"), nil
}

// buildAlone builds all of m's packages in a module that requires m at the release's
// version and nothing else, with -mod=readonly: the go command resolves nothing, so what
// m's go.mod requires must be enough. A requirement that only a go.work or a replace
// provided, a sibling required at a version that was never released, or code that does
// not compile against the sibling versions m requires, fails here. (go get would add a
// missing requirement of m's to the user's go.mod and hide it.)
func (u *user) buildAlone(r *repo, m *mod, name string) error {
	dir, err := u.newModule(r, name, m.Path+"@"+r.Version)
	if err != nil {
		return err
	}
	if _, err := u.goCmd(dir, nil, "build", "-mod=readonly", m.Path+"/..."); err != nil {
		return fmt.Errorf("%s@%s does not build from what its go.mod requires: %w", m.Path, r.Version, err)
	}
	return nil
}

// buildTogether runs the README's go get lines, checks that they resolved every module
// to the release, gets every module at the release's version explicitly, and builds a
// program importing every importable package of every module plus the smoke test. It
// returns the program's path.
func (u *user) buildTogether(r *repo, cmds []installCmd) (string, error) {
	dir, err := u.newModule(r, "together")
	if err != nil {
		return "", err
	}
	var named []string
	for _, args := range installArgs(cmds, "get") {
		if _, err := u.goCmd(dir, nil, append([]string{"get"}, args...)...); err != nil {
			return "", fmt.Errorf("README.md Install: %w", err)
		}
		for _, a := range args {
			p, _, _ := strings.Cut(a, "@")
			named = append(named, p)
		}
	}
	if len(named) > 0 {
		out, err := u.goCmd(dir, nil, append([]string{"list", "-m", "-f", "{{.Path}} {{.Version}}"}, named...)...)
		if err != nil {
			return "", err
		}
		for line := range strings.Lines(out) {
			if p, v, _ := strings.Cut(strings.TrimSpace(line), " "); v != r.Version {
				return "", fmt.Errorf("README.md Install: got %s %s, want %s", p, v, r.Version)
			}
		}
	}
	get := []string{"get"}
	var imports bytes.Buffer
	imports.WriteString("package main\n\n// Every importable package of every released module.\nimport (\n")
	for _, m := range r.Modules {
		get = append(get, m.Path+"@"+r.Version)
		for _, p := range m.Packages {
			fmt.Fprintf(&imports, "\t_ %q\n", p)
		}
	}
	imports.WriteString(")\n")
	if _, err := u.goCmd(dir, nil, get...); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "imports.go"), imports.Bytes(), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), smokeMain, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(u.work, "smoke")
	if _, err := u.goCmd(dir, nil, "build", "-o", bin, "."); err != nil {
		return "", fmt.Errorf("a program importing every module does not build: %w", err)
	}
	return bin, nil
}

// install runs go install with GOBIN=bin.
func (u *user) install(bin string, args ...string) error {
	_, err := u.goCmd(u.work, []string{"GOBIN=" + bin}, append([]string{"install"}, args...)...)
	return err
}

// checkVersion runs `sbemulator -version` and checks that it names the release.
func checkVersion(bin, version string) error {
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -version: %w\n%s", bin, err, indent(out))
	}
	if f := strings.Fields(string(out)); len(f) < 2 || f[0] != "sbemulator" || f[1] != version {
		return fmt.Errorf("%s -version printed %q, want \"sbemulator %s ...\"", bin, strings.TrimSpace(string(out)), version)
	}
	return nil
}

// runEmulator starts the installed emulator on a free port, checks that its first line is
// a connection string, runs the smoke program against it over AMQP, then stops it with
// SIGTERM and checks that it exits 0.
func runEmulator(ctx context.Context, bin, smoke string, verbose io.Writer) error {
	first := &firstLine{line: make(chan string, 1)}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-queue", "smoke")
	cmd.Stdout, cmd.Stderr = first, &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	// fail stops the emulator before reading what it wrote to stderr.
	fail := func(format string, args ...any) error {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf(format+"\n%s", append(args, indent(stderr.Bytes()))...)
	}
	var conn string
	select {
	case conn = <-first.line:
	case <-ctx.Done():
		return fail("sbemulator printed no line: %w", ctx.Err())
	}
	if !strings.HasPrefix(conn, "Endpoint=sb://127.0.0.1:") || !strings.Contains(conn, "UseDevelopmentEmulator=true") {
		return fail("sbemulator's first line is %q, want a connection string to 127.0.0.1 with UseDevelopmentEmulator=true", conn)
	}
	out, err := exec.CommandContext(ctx, smoke, "-connection-string", conn).CombinedOutput()
	fmt.Fprintf(verbose, "    smoke over AMQP: %s", out)
	if err != nil {
		return fail("smoke test against the installed sbemulator: %w\n%s", err, indent(out))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fail("%w", err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- cmd.Wait() }()
	select {
	case err := <-stopped:
		if err != nil {
			return fmt.Errorf("sbemulator after SIGTERM: %w (want exit status 0)\n%s", err, indent(stderr.Bytes()))
		}
		return nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-stopped
		return fmt.Errorf("sbemulator did not stop after SIGTERM: %w\n%s", ctx.Err(), indent(stderr.Bytes()))
	}
}

// firstLine is a process's standard output that sends its first line on line, once.
type firstLine struct {
	line chan string // buffered: Write never blocks

	mu   sync.Mutex
	buf  []byte
	sent bool
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.line <- strings.TrimSpace(string(w.buf[:i]))
		w.sent, w.buf = true, nil
	}
	return len(p), nil
}
