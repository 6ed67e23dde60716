package main

import (
	"runtime/debug"
	"strings"
)

// The module sbctl belongs to, and the core it runs.
const (
	sbctlModule = "github.com/sbkit/sbkit/cmd/sbctl"
	coreModule  = "github.com/sbkit/sbkit"
)

// versionLine is what `sbctl version` prints, from the build information the go command
// embeds (bi, ok as debug.ReadBuildInfo returns them): sbctl's module version, the
// core's, and the Go version. `go install github.com/sbkit/sbkit/cmd/sbctl@v0.1.0`
// prints "sbctl v0.1.0 (sbkit v0.1.0) go1.26.0"; a build in a clone prints "(devel)" or
// the version the go command derived from git, and the core's directory it replaces.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "sbctl (unknown: built without module information)"
	}
	v, core := "(unknown)", "(unknown)"
	if bi.Main.Path == sbctlModule {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == coreModule {
			core = d.Version
			if d.Replace != nil {
				core += " => " + strings.TrimSpace(d.Replace.Path+" "+d.Replace.Version)
			}
		}
	}
	return "sbctl " + v + " (sbkit " + core + ") " + bi.GoVersion
}
