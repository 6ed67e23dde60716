package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sbkit/sbkit/examples/internal/leaktest"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/examples/internal/scrapetest"
)

func noEnv(string) string { return "" }

// TestWorkerProcessesBacklog runs the worker on the in-memory backlog, fast, and checks
// that every message ended where it should: good orders fulfilled, the duplicate
// skipped, the malformed and the invalid ones dead-lettered, the expired one
// dead-lettered by the broker.
func TestWorkerProcessesBacklog(t *testing.T) {
	leaktest.Check(t)
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-unit", "1ms", "-idle", "200ms", "-lock", "1m"}, &out, io.Discard, noEnv); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"worker: 14 messages", "completed 12 (duplicates skipped 1), dead-lettered 2, abandoned 0, locks lost 0",
		"fulfilled  order-2001", "fulfilled  order-2011 for margaret: 150 units",
		"skipped    order-2003: already fulfilled",
		"dead-letter queue: order-2014  reason DeserializationFailed",
		"dead-letter queue: order-2012  reason InvalidOrder",
		"dead-letter queue: order-2013  reason TTLExpiredException",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "fulfilled  order-2003"); n != 1 {
		t.Errorf("order-2003 fulfilled %d times, want once", n)
	}
}

// TestWorkerRenewsLockOfBulkOrder: the bulk order takes 3s, more than the 2s lock, so its
// lock must be renewed and the order completed on its first delivery.
func TestWorkerRenewsLockOfBulkOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 3 seconds")
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-concurrency", "16", "-idle", "100ms", "-lock", "2s", "-unit", "20ms"}, &out, io.Discard, noEnv); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "order-2011 for margaret: 150 units, $1948.50, delivery 1") ||
		strings.Contains(out.String(), "lock renewals 0") || !strings.Contains(out.String(), "locks lost 0") {
		t.Errorf("bulk order's lock not renewed:\n%s", out.String())
	}
}

// cancelOn is an output that cancels a context when a line containing trigger is
// written. log.Logger serialises its writes.
type cancelOn struct {
	bytes.Buffer
	trigger string
	cancel  context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.trigger) {
		c.cancel()
	}
	return c.Buffer.Write(p)
}

// TestWorkerGracefulShutdown cancels the context (as SIGINT does) while the bulk order is
// in progress: the worker stops receiving and lets it finish within -grace.
func TestWorkerGracefulShutdown(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &cancelOn{trigger: "packing    order-2011", cancel: cancel}
	if err := run(ctx, []string{"-idle", "0", "-unit", "2ms", "-lock", "1m"}, out, io.Discard, noEnv); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	if !strings.Contains(text, "packing    order-2011") || !strings.Contains(text, "fulfilled  order-2011") ||
		!strings.Contains(text, "locks lost 0") {
		t.Errorf("order in progress not finished on shutdown:\n%s", text)
	}
}

func TestWorkerStopsAfterDuration(t *testing.T) {
	leaktest.Check(t)
	var out bytes.Buffer
	start := time.Now()
	if err := run(t.Context(), []string{"-unit", "1ms", "-idle", "0", "-duration", "300ms", "-lock", "1m"}, &out, io.Discard, noEnv); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("ran %v with -duration 300ms", elapsed)
	}
}

func TestWorkerBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"zero concurrency", []string{"-concurrency", "0"}, nil, "must be positive"},
		{"negative idle", []string{"-idle", "-1s"}, nil, "not negative"},
		{"zero lock", []string{"-lock", "0"}, nil, "-lock must be positive"},
		{"bad connection string", nil, map[string]string{sbenv.ConnectionStringEnv: "garbage"}, sbenv.ConnectionStringEnv},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t.Context(), tc.args, &bytes.Buffer{}, io.Discard, func(k string) string { return tc.env[k] })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWorkerHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &out, io.Discard, noEnv); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"-concurrency", "-idle", "-duration", "-grace", "-lock", "-log-level", sbenv.ConnectionStringEnv} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestWorkerMetricsAndSpans runs the worker with -metrics-addr and -spans, scrapes its
// Prometheus endpoint with net/http once the backlog is done, and finds the processor's
// metrics with the counts of the summary; every process span is in the trace of the
// send span of the backlog's producer.
func TestWorkerMetricsAndSpans(t *testing.T) {
	leaktest.Check(t)
	run := func(ctx context.Context, args []string, out io.Writer) error {
		return run(ctx, args, out, io.Discard, noEnv)
	}
	scrape, output := scrapetest.Run(t, run, []string{"-unit", "1ms", "-idle", "200ms", "-lock", "1m",
		"-metrics-addr", "127.0.0.1:0", "-metrics-hold", "1m", "-spans"}, "dead-letter queue: order-2013")
	scrapetest.Expect(t, scrape, []scrapetest.Sample{
		{Name: "messaging_client_consumed_messages_total", Labels: []string{`messaging_destination_name="orders"`, `messaging_system="servicebus"`}, Value: "14"},
		{Name: "messaging_client_sent_messages_total", Labels: []string{`messaging_operation_name="send"`}, Value: "15"},
		{Name: "sbkit_processor_outcomes_total", Labels: []string{`sbkit_outcome="complete"`}, Value: "12"},
		{Name: "sbkit_processor_outcomes_total", Labels: []string{`sbkit_outcome="dead_letter"`}, Value: "2"},
		{Name: "sbkit_dedupe_outcomes_total", Labels: []string{`sbkit_dedupe_outcome="duplicate"`}, Value: "1"},
		{Name: "messaging_process_duration_seconds_count", Labels: []string{`messaging_operation_name="process"`}, Value: "*"},
		{Name: "messaging_client_operation_duration_seconds_count", Labels: []string{`messaging_operation_name="complete"`}, Value: "*"},
		{Name: "sbkit_processor_handlers_running", Labels: nil, Value: "0"},
		{Name: "sbkit_processor_messages_buffered", Labels: nil, Value: "0"},
	})
	spans := scrapetest.Spans(t, output)
	traces := map[string]bool{}
	for _, s := range spans {
		if s.Name == "send orders" {
			traces[s.SpanContext.TraceID] = true
		}
	}
	processed := 0
	for _, s := range spans {
		if s.Name == "process orders" {
			processed++
			if !traces[s.SpanContext.TraceID] {
				t.Errorf("process span %s is in trace %s, which has no send span", s.SpanContext.SpanID, s.SpanContext.TraceID)
			}
		}
	}
	if len(traces) != 15 || processed != 14 {
		t.Errorf("%d send traces, %d process spans; want 15 and 14", len(traces), processed)
	}
}

// TestWorkerLogs: by default the worker logs its lifecycle at Info and what went wrong at
// Warn (here the undecodable order, by its MessageID) to stderr, and no payload; with
// -log-level debug it also logs each settlement. The story of the orders stays on stdout.
func TestWorkerLogs(t *testing.T) {
	payloads := []string{"linus", "margaret", "KB-1", "USB-C"} // customers and SKUs of the backlog
	for _, tc := range []struct {
		level      string
		want, lack []string
	}{
		{"", []string{
			`level=INFO msg="worker: started" queue=orders concurrency=4`,
			`level=WARN msg="serialize: dead-lettering undecodable message" messageID=order-2014`,
			`level=INFO msg="worker: stopping" reason="idle for 200ms"`,
			`level=INFO msg="worker: stopped" received=14 completed=12 deadLettered=2 abandoned=0 locksLost=0 leftLocked=0`,
		}, []string{"level=DEBUG"}},
		{"debug", []string{
			`level=DEBUG msg="receiver: settled" messageID=order-2001 action=complete`,
			`level=DEBUG msg="dedupe: duplicate skipped" key=orders:order-2003`,
			`level=INFO msg="worker: stopped" received=14`,
		}, nil},
	} {
		t.Run("level="+tc.level, func(t *testing.T) {
			leaktest.Check(t)
			args := []string{"-unit", "1ms", "-idle", "200ms", "-lock", "1m"}
			if tc.level != "" {
				args = append(args, "-log-level", tc.level)
			}
			var out, logs bytes.Buffer
			if err := run(t.Context(), args, &out, &logs, noEnv); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			text := logs.String()
			for _, want := range tc.want {
				if !strings.Contains(text, want) {
					t.Errorf("log lacks %q:\n%s", want, text)
				}
			}
			for _, lack := range append(tc.lack, payloads...) {
				if strings.Contains(text, lack) {
					t.Errorf("log has %q:\n%s", lack, text)
				}
			}
			if strings.Contains(out.String(), "level=") {
				t.Errorf("log records on stdout:\n%s", out.String())
			}
		})
	}
}
