package sbkit_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadmeSnippetsAreBacked: every Go block of README.md and docs/*.md is a run of
// consecutive lines of a test file of this repository (compared without indentation and
// blank lines), so that it compiles and stays true as the code changes.
func TestReadmeSnippetsAreBacked(t *testing.T) {
	var sources [][]string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources = append(sources, codeLines(string(data)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob("docs/*.md")
	for _, doc := range append([]string{"README.md"}, docs...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range goBlocks(string(data)) {
			if !backed(codeLines(b.text), sources) {
				t.Errorf("%s:%d: this Go block is not a run of lines of any _test.go file:\n%s", doc, b.line, b.text)
			}
		}
	}
}

type block struct {
	line int // of the opening fence
	text string
}

// goBlocks returns the ```go blocks of a Markdown text.
func goBlocks(md string) []block {
	var (
		blocks []block
		cur    *block
		lines  []string
	)
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur, lines = &block{line: n}, nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = strings.Join(lines, "\n")
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			lines = append(lines, line)
		}
	}
	return blocks
}

// codeLines returns the non-blank lines of text without their indentation.
func codeLines(text string) []string {
	var out []string
	for line := range strings.Lines(text) {
		if l := strings.TrimSpace(line); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// backed reports whether want occurs as consecutive lines of one of sources.
func backed(want []string, sources [][]string) bool {
	for _, src := range sources {
		for i := 0; i+len(want) <= len(src); i++ {
			if slices.Equal(src[i:i+len(want)], want) {
				return true
			}
		}
	}
	return false
}

// TestReadmeTestCommandIsCIs: the test command of the README's Development section is a
// line of .ci/run, so that what a contributor runs is what CI runs.
func TestReadmeTestCommandIsCIs(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	_, dev, ok := strings.Cut(string(readme), "\n## Development\n")
	if !ok {
		t.Fatal("README.md has no Development section")
	}
	var cmd string
	for line := range strings.Lines(dev) {
		if c, ok := strings.CutSuffix(strings.TrimSpace(line), "# the tests"); ok {
			cmd = strings.TrimSpace(c)
			break
		}
	}
	if cmd == "" {
		t.Fatal("README.md's Development section has no line ending in \"# the tests\"")
	}
	if !slices.Contains(codeLines(string(ci)), cmd) {
		t.Errorf("README.md's test command %q is not a line of .ci/run", cmd)
	}
}
