package sbkit_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// trackerRef matches what a reader cannot open: a tracker's issue or defect number, or
// the number of a source document only the project's own notes hold.
var trackerRef = regexp.MustCompile(`(?i)\b(issue|defect)s? ?#?[0-9]|\bseeds? 00[0-9]`)

// TestNoTrackerReferences: comments and docs cite what a reader can open (the Service
// Bus docs by title and URL, the SDK's source or live tests, the AMQP spec), never a
// tracker's or a seed document's number.
func TestNoTrackerReferences(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := trackerRef.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: cite what a reader can open instead", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
