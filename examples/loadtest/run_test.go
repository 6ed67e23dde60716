package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbkit/sbkit/examples/internal/leaktest"
)

// TestRunSmoke runs the whole load test in-process, every mode, with tiny N and no
// latency, and checks the table, the CSV and the SVG it produces.
func TestRunSmoke(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	csvPath, svgPath := filepath.Join(dir, "out.csv"), filepath.Join(dir, "out.svg")
	var out bytes.Buffer
	args := []string{"-n", "30", "-rtt", "0", "-store", "0", "-handler", "0",
		"-windows", "1,4,16", "-concurrency", "1,4", "-prefetch", "auto,none,3", "-csv", csvPath, "-svg", svgPath}
	if err := run(t.Context(), args, &out, nil, func(string) string { return "" }); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	rows := []string{"sequential", "goroutines", "pipelined w=1", "pipelined w=4", "pipelined w=16",
		"batched", "processor c=1", "processor c=1 no-prefetch", "processor c=1 prefetch=3",
		"processor c=4", "processor c=4 no-prefetch", "processor c=4 prefetch=3"}
	for _, want := range append(rows, "msgs/s", "in-memory broker") {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "errors, the first") || strings.Contains(out.String(), "\r") {
		t.Errorf("errors or progress output in a quiet run:\n%s", out.String())
	}

	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil || len(records) != len(rows)+1 {
		t.Fatalf("CSV: %d records, %v", len(records), err)
	}
	for _, rec := range records[1:] {
		if rec[3] != "30" || rec[4] != "0" { // messages, errors
			t.Errorf("CSV row %v: want 30 messages and no errors", rec)
		}
		if rec[10] == "0" { // peak_inflight_bytes
			t.Errorf("CSV row %v: no bytes were ever in flight", rec)
		}
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	// One point per window, and per processor configuration in each processor chart.
	if count := parseSVG(t, svg); count["circle"] != 3+2*6 {
		t.Errorf("SVG has %d points, want 15", count["circle"])
	}
}

// TestRunWire runs the processor mode through the real SDK client on sbtest.NewServer.
func TestRunWire(t *testing.T) {
	leaktest.Check(t)
	var out bytes.Buffer
	args := []string{"-n", "20", "-rtt", "0", "-store", "0", "-handler", "0", "-wire",
		"-modes", "sequential,processor", "-concurrency", "4", "-prefetch", "auto,none"}
	if err := run(t.Context(), args, &out, nil, func(string) string { return "" }); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"sbtest.NewServer", "processor c=4", "processor c=4 no-prefetch"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "errors, the first") {
		t.Errorf("errors:\n%s", out.String())
	}
}

// TestRunRoundTrips runs the processor at two round trips: a pass of every mode at each,
// rows labelled with their round trip, and speed-ups against concurrency 1 at the same
// round trip.
func TestRunRoundTrips(t *testing.T) {
	leaktest.Check(t)
	var out bytes.Buffer
	args := []string{"-n", "20", "-rtt", "1ms,3ms", "-store", "0", "-handler", "1ms",
		"-modes", "processor", "-concurrency", "1,4"}
	if err := run(t.Context(), args, &out, nil, func(string) string { return "" }); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var rows []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "processor c=") {
			f := strings.Fields(l)
			rows = append(rows, f[0]+" "+f[1]+" "+f[2])
			if f[1] == "c=1" && f[4] != "1.0x" {
				t.Errorf("baseline row %q: speed-up %s, want 1.0x", l, f[4])
			}
		}
	}
	want := []string{"processor c=1 1ms", "processor c=4 1ms", "processor c=1 3ms", "processor c=4 3ms"}
	if !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q:\n%s", rows, want, out.String())
	}
	if !strings.Contains(out.String(), "rtt 1ms, 3ms") {
		t.Errorf("the round trips are not described:\n%s", out.String())
	}
}

func TestRunBadFlags(t *testing.T) {
	err := run(t.Context(), []string{"-modes", "nope"}, &bytes.Buffer{}, nil, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "unknown mode") {
		t.Errorf("err = %v", err)
	}
}

func TestRunSubsetAndProgress(t *testing.T) {
	leaktest.Check(t)
	var out, progress bytes.Buffer
	args := []string{"-n", "10", "-rtt", "0", "-store", "0", "-modes", "sequential,batched", "-progress", "1ms"}
	if err := run(t.Context(), args, &out, &progress, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "pipelined w=") || strings.Contains(out.String(), "processor c=") {
		t.Errorf("modes not selected were run:\n%s", out.String())
	}
	if strings.Contains(progress.String(), "\n") {
		t.Errorf("progress wrote a newline: %q", progress.String())
	}
}
