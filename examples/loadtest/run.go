package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/sbtest"
)

// run is the whole program: it parses args, runs the selected modes, prints the table to
// stdout and writes the optional CSV and SVG files. progress receives the live status
// line; nil keeps it quiet. getenv reads the environment.
func run(ctx context.Context, args []string, stdout, progress io.Writer, getenv func(string) string) error {
	cfg, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	var p *Progress
	if progress != nil {
		p = NewProgress(progress, cfg.progress)
	}
	var results []Result
	for i, rtt := range cfg.rtts {
		conn, err := sbenv.Open(&sbenv.Options{
			Getenv:  getenv,
			Latency: sbtest.Latency{RoundTrip: rtt, StoreTime: cfg.store, StoreConcurrency: cfg.storePar},
			Wire:    cfg.wire,
		})
		if err != nil {
			return err
		}
		if !conn.InMemory() {
			rtt = 0 // a real namespace's round trip is its own
		}
		if i == 0 {
			fmt.Fprintf(stdout, "%s\n", describe(cfg, conn))
		}
		r := newRunner(cfg, conn, p, rtt)
		var res []Result
		res, err = r.runAll(ctx)
		results = append(results, res...)
		_ = conn.Close(context.WithoutCancel(ctx))
		if err != nil || !conn.InMemory() {
			break
		}
	}
	fmt.Fprintln(stdout)
	if werr := WriteTable(stdout, results); werr != nil && err == nil {
		err = werr
	}
	writeNotes(stdout, results)
	for _, res := range results {
		if res.FirstErr != nil {
			fmt.Fprintf(stdout, "%s: %d errors, the first: %v\n", res.Name(), res.Errors, res.FirstErr)
		}
	}
	if cfg.csvPath != "" {
		if werr := writeFile(cfg.csvPath, func(w io.Writer) error { return WriteCSV(w, results) }); werr != nil && err == nil {
			err = werr
		}
	}
	if cfg.svgPath != "" {
		title := fmt.Sprintf("sbkit loadtest: %d messages of %d B, handler %v", cfg.n, cfg.size, cfg.handler)
		if werr := writeFile(cfg.svgPath, func(w io.Writer) error { return WriteSVG(w, title, results) }); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

func describe(cfg *config, conn *sbenv.Conn) string {
	s := fmt.Sprintf("loadtest: %d messages of %d bytes per mode on the %s", cfg.n, cfg.size, conn)
	if conn.InMemory() {
		rtts := make([]string, len(cfg.rtts))
		for i, rtt := range cfg.rtts {
			rtts[i] = rtt.String()
		}
		s += fmt.Sprintf(" (rtt %s; store %v)", strings.Join(rtts, ", "), cfg.store)
	}
	return s + fmt.Sprintf(", handler %v", cfg.handler)
}

// runAll runs the selected modes in order and returns the results so far when one fails
// or ctx ends.
func (r *runner) runAll(ctx context.Context) ([]Result, error) {
	var results []Result
	add := func(res Result, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", res.Name(), err)
		}
		results = append(results, res)
		return nil
	}
	for _, mode := range r.cfg.modes {
		var err error
		switch mode {
		case "sequential":
			err = add(r.sequential(ctx))
		case "goroutines":
			err = add(r.goroutines(ctx))
		case "pipelined":
			for _, w := range r.cfg.windows {
				if err = add(r.pipelined(ctx, w)); err != nil {
					break
				}
			}
		case "batched":
			err = add(r.batched(ctx))
		case "processor":
		loop:
			for _, c := range r.cfg.concurrencies {
				for _, pf := range r.cfg.prefetches {
					if err = add(r.processor(ctx, c, pf)); err != nil {
						break loop
					}
				}
			}
		}
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// writeNotes explains the speed-up and latency columns for the kinds of rows present.
func writeNotes(w io.Writer, results []Result) {
	var send, process bool
	for _, r := range results {
		send, process = send || r.Kind == KindSend, process || r.Kind == KindProcess
	}
	if send {
		fmt.Fprintln(w, "send modes: speed-up against sequential; latency from acceptance to outcome.")
	}
	if process {
		fmt.Fprintln(w, "processor: speed-up against concurrency 1; of C/h: against what the handlers could do;")
		fmt.Fprintln(w, "  after a warm-up; latency from receipt to completion; buffered: most messages waiting")
		fmt.Fprintln(w, "  for a handler at once / when stopped; abandoned: by the stop.")
	}
}

// writeFile creates path and writes it with write, reporting the first error.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
