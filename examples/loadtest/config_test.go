package main

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsDefaults(t *testing.T) {
	cfg, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.n != 500 || !slices.Equal(cfg.rtts, []time.Duration{7 * time.Millisecond}) || cfg.store != time.Millisecond || cfg.handler != 5*time.Millisecond {
		t.Errorf("defaults: %+v", cfg)
	}
	if !slices.Equal(cfg.modes, allModes) || !slices.Equal(cfg.windows, []int{1, 4, 16, 64, 256}) || !slices.Equal(cfg.concurrencies, []int{1, 8, 32}) ||
		!slices.Equal(cfg.prefetches, []string{"auto"}) {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(*config) bool
	}{
		{"modes subset keeps canonical order", []string{"-modes", "processor, sequential"}, "",
			func(c *config) bool { return slices.Equal(c.modes, []string{"sequential", "processor"}) }},
		{"windows", []string{"-windows", "2,8"}, "", func(c *config) bool { return slices.Equal(c.windows, []int{2, 8}) }},
		{"latency", []string{"-rtt", "0", "-store", "0", "-handler", "0"}, "",
			func(c *config) bool {
				return slices.Equal(c.rtts, []time.Duration{0}) && c.store == 0 && c.handler == 0
			}},
		{"unknown mode", []string{"-modes", "turbo"}, `unknown mode "turbo"`, nil},
		{"no mode", []string{"-modes", ","}, "no mode selected", nil},
		{"bad window", []string{"-windows", "4,x"}, `"x" is not a positive integer`, nil},
		{"zero concurrency", []string{"-concurrency", "0"}, `"0" is not a positive integer`, nil},
		{"prefetches", []string{"-prefetch", "none, 16,auto"}, "",
			func(c *config) bool { return slices.Equal(c.prefetches, []string{"none", "16", "auto"}) }},
		{"wire", []string{"-wire"}, "", func(c *config) bool { return c.wire }},
		{"bad prefetch", []string{"-prefetch", "auto,0"}, `"0" is not auto, none or a positive integer`, nil},
		{"no prefetch", []string{"-prefetch", ","}, "-prefetch: empty list", nil},
		{"zero n", []string{"-n", "0"}, "-n must be positive", nil},
		{"negative rtt", []string{"-rtt", "-1ms"}, `"-1ms" is not a duration of at least 0`, nil},
		{"round trips", []string{"-rtt", "1ms, 50ms,100ms"}, "", func(c *config) bool {
			return slices.Equal(c.rtts, []time.Duration{time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond})
		}},
		{"bad rtt", []string{"-rtt", "7"}, `"7" is not a duration`, nil},
		{"no rtt", []string{"-rtt", ","}, "-rtt: empty list", nil},
		{"negative handler", []string{"-handler", "-1ms"}, "must not be negative", nil},
		{"stray argument", []string{"extra"}, "unexpected arguments", nil},
		{"unknown flag", []string{"-bogus"}, "flag provided but not defined", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseFlags(tc.args, &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg) {
				t.Errorf("parsed %+v", cfg)
			}
		})
	}
}

func TestHelpExplainsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"SBKIT_CONNECTION_STRING", "SBKIT_QUEUE", "-n", "-modes", "-windows", "-concurrency", "-prefetch",
		"-rtt", "-store", "-handler", "-wire", "-prefetch", "-csv", "-svg", "sequential", "processor"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
