package main

import (
	"runtime/debug"
	"strings"
)

// modulePath is the module cmd/sbemulator belongs to.
const modulePath = "github.com/sbkit/sbkit"

// versionLine is what -version prints, from the build information the go command embeds
// (bi, ok as debug.ReadBuildInfo returns them): the module's version, then the VCS
// revision when the build recorded one, then the Go version. `go install
// github.com/sbkit/sbkit/cmd/sbemulator@v0.1.0` prints "sbemulator v0.1.0 go1.26.0"; a
// build in a clone prints the version the go command derived from git (a tag, or a
// pseudo-version, "+dirty" when modified) and the revision, or "(devel)" with
// -buildvcs=false; a build from another main module prints the version it requires.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "sbemulator (unknown: built without module information)"
	}
	v := "(unknown)"
	if bi.Main.Path == modulePath {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath {
			v = d.Version
			if d.Replace != nil {
				v += " => " + strings.TrimSpace(d.Replace.Path+" "+d.Replace.Version)
			}
		}
	}
	parts := []string{"sbemulator", v}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		parts = append(parts, "revision", rev[:min(len(rev), 12)])
		if settings["vcs.modified"] == "true" {
			parts = append(parts, "(modified)")
		}
	}
	return strings.Join(append(parts, bi.GoVersion), " ")
}
