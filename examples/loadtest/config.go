package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sbkit/sbkit/examples/internal/sbenv"
)

// allModes lists the modes in the order they run and appear in the table.
var allModes = []string{"sequential", "goroutines", "pipelined", "batched", "processor"}

// config is the parsed command line.
type config struct {
	n             int
	size          int
	modes         []string
	windows       []int
	concurrencies []int
	prefetches    []string        // "auto", "none", or a PrefetchCount; see parsePrefetches
	rtts          []time.Duration // the in-memory broker's round trips, each a pass of every mode
	store         time.Duration
	storePar      int
	handler       time.Duration
	wire          bool
	csvPath       string
	svgPath       string
	progress      time.Duration
}

const usageHeader = `loadtest sends and receives N messages in every sending and receiving mode of sbkit
and prints a comparison table.

It runs against an in-memory Service Bus (package sbtest) with the latency model given by
-rtt, -store and -handler (with -wire, served by sbtest.NewServer to the real azservicebus
client over AMQP on loopback), unless SBKIT_CONNECTION_STRING is set: then it uses that
namespace and the queue named by SBKIT_QUEUE (default "orders"), which must exist and
should be empty; the latency flags other than -handler are then ignored. -rtt takes a
list: every mode runs at each round trip in turn, on a new in-memory broker.

Modes:
  sequential   one SendMessage at a time, waiting for each outcome (the baseline)
  goroutines   one goroutine per message, all at once (no bound on memory)
  pipelined    sbkit's sender with at most W sends in flight, for each -windows W
  batched      sbkit's sender packing messages into batches
  processor    sbkit's processor with C concurrent handlers, for each -concurrency C and
               each -prefetch P: auto (the adaptive prefetch, the default), none
               (DisablePrefetch), or a fixed PrefetchCount

Each send mode is followed by an untimed drain of the queue (receive-and-delete); each
processor run is preceded by an untimed fill of N messages and more, so that it is
stopped in steady state at the last timed completion, and followed by an untimed drain
of what is left. A processor run is timed after a warm-up (the completions its handlers
make in three round trips, at most N), so that its msgs/s and latency (from receipt to
completion) are those of the steady state; "of C/h" is its throughput against what C
handlers of -handler each could do. "peak in-flight" is the
largest number of bytes inside send requests at once (send modes) or received and not
yet settled (processor runs). "buffered" is the most messages that waited for a handler
at once, and how many waited when the processor was stopped; "abandoned" is how many
the stop gave back (running handlers finish; each abandon counts a delivery).

Usage:
  loadtest [flags]

Flags:
`

// parseFlags parses args (without the program name). It returns flag.ErrHelp for -h.
func parseFlags(args []string, output io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n"+sbenv.EnvHelp)
	}
	fs.IntVar(&cfg.n, "n", 500, "messages to send and receive in each mode")
	fs.IntVar(&cfg.size, "size", 512, "message body size in bytes")
	modes := fs.String("modes", strings.Join(allModes, ","), "comma-separated modes to run: "+strings.Join(allModes, ", "))
	windows := fs.String("windows", "1,4,16,64,256", "comma-separated windows (sends in flight) for the pipelined mode")
	concurrencies := fs.String("concurrency", "1,8,32", "comma-separated handler concurrencies for the processor mode")
	prefetches := fs.String("prefetch", "auto", "comma-separated prefetch settings for the processor mode: auto, none, or a count")
	rtts := fs.String("rtt", "7ms", "in-memory broker: comma-separated round trips of every operation; every mode runs at each")
	fs.DurationVar(&cfg.store, "store", time.Millisecond, "in-memory broker: extra time to store each send or batch request")
	fs.IntVar(&cfg.storePar, "store-concurrency", 0, "in-memory broker: requests stored in parallel (0 = unlimited)")
	fs.DurationVar(&cfg.handler, "handler", 5*time.Millisecond, "processor mode: time each handler takes")
	fs.BoolVar(&cfg.wire, "wire", false, "in-memory broker: serve it with sbtest.NewServer and use the real azservicebus client")
	fs.StringVar(&cfg.csvPath, "csv", "", "also write the table as CSV to this `file`")
	fs.StringVar(&cfg.svgPath, "svg", "", "also write SVG charts to this `file`: pipelined sends' throughput against the window, the processor's throughput and p50 against the round trip")
	fs.DurationVar(&cfg.progress, "progress", 200*time.Millisecond, "refresh interval of the progress line (shown only on a terminal)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if cfg.modes, err = parseModes(*modes); err != nil {
		return nil, err
	}
	if cfg.windows, err = parseInts("-windows", *windows); err != nil {
		return nil, err
	}
	if cfg.concurrencies, err = parseInts("-concurrency", *concurrencies); err != nil {
		return nil, err
	}
	if cfg.prefetches, err = parsePrefetches(*prefetches); err != nil {
		return nil, err
	}
	if cfg.rtts, err = parseDurations("-rtt", *rtts); err != nil {
		return nil, err
	}
	switch {
	case cfg.n <= 0:
		return nil, errors.New("-n must be positive")
	case cfg.size < 0:
		return nil, errors.New("-size must not be negative")
	case cfg.store < 0 || cfg.handler < 0:
		return nil, errors.New("-store and -handler must not be negative")
	case cfg.storePar < 0:
		return nil, errors.New("-store-concurrency must not be negative")
	case cfg.progress <= 0:
		return nil, errors.New("-progress must be positive")
	}
	return cfg, nil
}

// parseModes parses a comma-separated subset of allModes, keeping allModes' order.
func parseModes(s string) ([]string, error) {
	want := map[string]bool{}
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		if !slices.Contains(allModes, m) {
			return nil, fmt.Errorf("-modes: unknown mode %q (have %s)", m, strings.Join(allModes, ", "))
		}
		want[m] = true
	}
	if len(want) == 0 {
		return nil, errors.New("-modes: no mode selected")
	}
	var out []string
	for _, m := range allModes {
		if want[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", name, f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", name)
	}
	return out, nil
}

// parseDurations parses a comma-separated list of durations that are not negative.
func parseDurations(name, s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%s: %q is not a duration of at least 0 (like 7ms)", name, f)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", name)
	}
	return out, nil
}

// parsePrefetches parses a comma-separated list of prefetch settings: "auto", "none", or
// a positive PrefetchCount.
func parsePrefetches(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
			continue
		case f == "auto" || f == "none":
		default:
			if v, err := strconv.Atoi(f); err != nil || v <= 0 {
				return nil, fmt.Errorf("-prefetch: %q is not auto, none or a positive integer", f)
			}
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, errors.New("-prefetch: empty list")
	}
	return out, nil
}
