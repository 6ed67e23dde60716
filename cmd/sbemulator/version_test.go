package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"testing"

	"github.com/sbkit/sbkit/sbtest"
)

// TestVersionLine: what -version prints for each kind of build information.
func TestVersionLine(t *testing.T) {
	t.Parallel()
	main := func(v string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.0", Path: modulePath + "/cmd/sbemulator",
			Main: debug.Module{Path: modulePath, Version: v}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	other := func(dep *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Path: modulePath + "/cmd/sbemulator",
			Main: debug.Module{Path: "example.com/app", Version: "(devel)"}, Deps: []*debug.Module{dep}}
	}
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go install @version", main("v0.1.0"), true, "sbemulator v0.1.0 go1.26.0"},
		{"clone at a tag", main("v0.1.0", "vcs", "git", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "false"), true,
			"sbemulator v0.1.0 revision 0123456789ab go1.26.0"},
		{"modified clone", main("v0.1.1-0.20260102030405-0123456789ab+dirty", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"), true,
			"sbemulator v0.1.1-0.20260102030405-0123456789ab+dirty revision 0123456789ab (modified) go1.26.0"},
		{"-buildvcs=false", main("(devel)"), true, "sbemulator (devel) go1.26.0"},
		{"dependency of another module", other(&debug.Module{Path: modulePath, Version: "v0.1.0"}), true, "sbemulator v0.1.0 go1.26.0"},
		{"replaced dependency", other(&debug.Module{Path: modulePath, Version: "v0.1.0", Replace: &debug.Module{Path: "../sbkit"}}), true,
			"sbemulator v0.1.0 => ../sbkit go1.26.0"},
		{"no build information", nil, false, "sbemulator (unknown: built without module information)"},
	} {
		if got := versionLine(tt.bi, tt.ok); got != tt.want {
			t.Errorf("%s: versionLine = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestVersionFlag: -version prints one line from the binary's own build information to
// standard output and returns without serving.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	ready := make(chan *sbtest.Server, 1)
	if err := run(context.Background(), []string{"-version", "-addr", "127.0.0.1:0"}, noEnv, &stdout, &stderr, ready); err != nil {
		t.Fatalf("run(-version) = %v (%s)", err, stderr.String())
	}
	bi, ok := debug.ReadBuildInfo()
	if got, want := stdout.String(), versionLine(bi, ok)+"\n"; got != want {
		t.Errorf("-version printed %q, want %q", got, want)
	}
	if len(ready) > 0 || stderr.Len() > 0 {
		t.Errorf("-version started a server or wrote to stderr: %q", stderr.String())
	}
}
