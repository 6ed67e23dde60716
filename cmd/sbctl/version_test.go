package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionLine(t *testing.T) {
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: sbctlModule, Version: "v0.2.0"},
			Deps: []*debug.Module{{Path: coreModule, Version: "v0.2.0"}}}, true, "sbctl v0.2.0 (sbkit v0.2.0) go1.26.0"},
		{"a clone", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: sbctlModule, Version: "(devel)"},
			Deps: []*debug.Module{{Path: coreModule, Version: "v0.2.0", Replace: &debug.Module{Path: "../.."}}}}, true, "sbctl (devel) (sbkit v0.2.0 => ../..) go1.26.0"},
		{"no build information", nil, false, "sbctl (unknown: built without module information)"},
	} {
		if got := versionLine(tt.bi, tt.ok); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
