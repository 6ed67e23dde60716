package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// writeProxy writes every module of r at r.Version into dir, laid out as a module proxy
// that GOPROXY=file://dir serves (`go help goproxy`): <escaped path>/@v/list, and
// <version>.info, .mod and .zip. Each zip holds what the go command would download for a
// tag of the working tree: golang.org/x/mod/zip checks and writes it (file names, sizes,
// nested modules left out), from the files git would commit.
func (r *repo) writeProxy(dir string) error {
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{r.Version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for _, m := range r.Modules {
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		zipFile := filepath.Join(vdir, r.Version+".zip")
		if err := r.writeZip(zipFile, m); err != nil {
			return err
		}
		if err := r.addSums(m, zipFile); err != nil {
			return err
		}
		for name, data := range map[string][]byte{
			"list":              []byte(r.Version + "\n"),
			r.Version + ".info": info,
			r.Version + ".mod":  m.Released,
		} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// addSums records the go.sum lines of m's zip and go.mod (the hashes the go command
// computes, golang.org/x/mod/sumdb/dirhash's Hash1), so that a user module can list them
// and build with -mod=readonly; the go command checks every download against them.
func (r *repo) addSums(m *mod, zipFile string) error {
	h, err := dirhash.HashZip(zipFile, dirhash.Hash1)
	if err != nil {
		return err
	}
	hmod, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(m.Released)), nil
	})
	if err != nil {
		return err
	}
	r.sums = append(r.sums,
		fmt.Sprintf("%s %s %s", m.Path, r.Version, h),
		fmt.Sprintf("%s %s/go.mod %s", m.Path, r.Version, hmod))
	return nil
}

// writeZip writes m's module zip to file.
func (r *repo) writeZip(file string, m *mod) error {
	var files []zip.File
	haveLicense := false
	for _, f := range r.filesOf(m) {
		rf := repoFile{name: f, file: filepath.Join(r.Dir, filepath.FromSlash(m.Dir), filepath.FromSlash(f))}
		if f == "go.mod" {
			rf.data = m.Released // as the module's tag holds it
		}
		files = append(files, rf)
		haveLicense = haveLicense || f == "LICENSE"
	}
	// The go command puts the repository's LICENSE into a nested module's zip that has none
	// of its own (cmd/go/internal/modfetch, codeRepo.Zip).
	if m.Dir != "" && !haveLicense && slices.Contains(r.Files, "LICENSE") {
		files = append(files, repoFile{name: "LICENSE", file: filepath.Join(r.Dir, "LICENSE")})
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := zip.Create(out, module.Version{Path: m.Path, Version: r.Version}, files); err != nil {
		out.Close()
		return fmt.Errorf("zip of %s@%s: %w", m.Path, r.Version, err)
	}
	return out.Close()
}

// repoFile is a file of the working tree, as golang.org/x/mod/zip reads one, or the
// content given in data instead.
type repoFile struct {
	name string // slash-separated, relative to the module's directory
	file string // absolute
	data []byte // when not nil, the file's content
}

func (f repoFile) Path() string { return f.name }

func (f repoFile) Lstat() (fs.FileInfo, error) {
	fi, err := os.Lstat(f.file)
	if err != nil || f.data == nil {
		return fi, err
	}
	return sizedInfo{fi, int64(len(f.data))}, nil
}

func (f repoFile) Open() (io.ReadCloser, error) {
	if f.data != nil {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return os.Open(f.file)
}

// sizedInfo is a file's information with another size.
type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }
