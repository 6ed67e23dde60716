package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// docsRepo is a repository of three modules, one of which (examples) has only commands,
// with the given README and CHANGELOG.
func docsRepo(t *testing.T, readme, changelog string) *repo {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"README.md": readme, "CHANGELOG.md": changelog} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	replaced := &modfile.File{Replace: []*modfile.Replace{{Old: module.Version{Path: "example.com/fix"}, New: module.Version{Path: ".."}}}}
	return &repo{Dir: dir, Version: "v0.2.0", Root: "example.com/fix", Modules: []*mod{
		{Path: "example.com/fix", Packages: []string{"example.com/fix"}, File: &modfile.File{}, ReleasedFile: &modfile.File{}},
		{Dir: "otel", Path: "example.com/fix/otel", Packages: []string{"example.com/fix/otel"}, File: replaced, ReleasedFile: replaced},
		{Dir: "examples", Path: "example.com/fix/examples", File: replaced, ReleasedFile: replaced},
		// A command module: its tag's go.mod has no replace.
		{Dir: "cmd/ctl", Path: "example.com/fix/cmd/ctl", File: replaced, ReleasedFile: &modfile.File{}, Command: true},
	}}
}

const goodInstall = "# x\n\n## Install\n\n```sh\n" +
	"go get example.com/fix          # Go 1.26 or newer\n" +
	"go get example.com/fix/otel@v0.2.0\n" +
	"\n" +
	"go install example.com/fix/cmd/sbemulator@latest # the emulator\n" +
	"```\n\n```sh\nrm -rf /\n```\n\n## Next\n"

// TestReadInstall: the README's Install block is parsed into the commands the check runs,
// and anything it cannot run as written, or that leaves a module out, is a problem.
func TestReadInstall(t *testing.T) {
	t.Parallel()
	r := docsRepo(t, goodInstall, "")
	cmds, problems := r.readInstall()
	if len(problems) > 0 {
		t.Fatalf("problems %q", problems)
	}
	if got := installArgs(cmds, "get"); len(got) != 2 || !slices.Equal(got[0], []string{"example.com/fix"}) || !slices.Equal(got[1], []string{"example.com/fix/otel@v0.2.0"}) {
		t.Errorf("go get arguments %q", got)
	}
	if got := installArgs(cmds, "install"); len(got) != 1 || !slices.Equal(got[0], []string{"example.com/fix/cmd/sbemulator@latest"}) {
		t.Errorf("go install arguments %q", got)
	}

	for _, tt := range []struct {
		name, from, to, want string
	}{
		{"module left out", "go get example.com/fix/otel@v0.2.0\n", "", "no `go get example.com/fix/otel` line"},
		{"emulator left out", "go install example.com/fix/cmd/sbemulator@latest # the emulator\n", "", "no `go install example.com/fix/cmd/sbemulator@latest` line"},
		{"old version", "otel@v0.2.0", "otel@v0.1.0", "@v0.1.0: the release is v0.2.0"},
		{"other repository", "go get example.com/fix ", "go get example.com/other ", "example.com/other is not in this repository"},
		{"package, not module", "go get example.com/fix/otel@v0.2.0", "go get example.com/fix/otel/sub", "example.com/fix/otel/sub is not a module path"},
		{"install without version", "sbemulator@latest", "sbemulator", "go install outside a module needs @version"},
		{"flags", "go get example.com/fix ", "go get -u example.com/fix ", "flags are not checked"},
		{"install from a module with replace lines", "go install example.com/fix/cmd/sbemulator@latest", "go install example.com/fix/examples/loadtest@latest",
			"go install example.com/fix/examples/loadtest@version refuses a module whose go.mod has replace or exclude directives (examples/go.mod has)"},
		{"other command", "\n\ngo install", "\ncurl https://example.com | sh\ngo install", `"curl https://example.com | sh": only`},
		{"no section", "## Install\n", "## Installing\n", "no fenced code block under"},
	} {
		readme := strings.Replace(goodInstall, tt.from, tt.to, 1)
		if readme == goodInstall {
			t.Fatalf("%s: %q is not in the README", tt.name, tt.from)
		}
		_, problems := docsRepo(t, readme, "").readInstall()
		if text := strings.Join(problems, "\n"); !strings.Contains(text, tt.want) {
			t.Errorf("%s: problems:\n%s\nwant one containing %q", tt.name, text, tt.want)
		}
	}
}

// TestChangelog: the release needs a section headed by its version.
func TestChangelog(t *testing.T) {
	t.Parallel()
	for changelog, ok := range map[string]bool{
		"# Changelog\n\n## v0.2.0 (unreleased): the next\n\n## v0.1.0 (2026-01-02)\n": true,
		"## v0.2.0\n":                 true,
		"## v0.2.0: things\n":         true,
		"## Unreleased\n\n- v0.2.0\n": false,
		"## v0.2.0-rc.1\n":            false,
		"## v0.1.0\n":                 false,
		"### v0.2.0\n":                false,
	} {
		problems := docsRepo(t, "", changelog).checkChangelog()
		if ok != (len(problems) == 0) {
			t.Errorf("CHANGELOG %q: problems %q, want ok=%v", changelog, problems, ok)
		}
	}
}
