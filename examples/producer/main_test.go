package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/sbkit/sbkit/examples/internal/leaktest"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/examples/internal/scrapetest"
)

func TestProducerPublishesEveryOrder(t *testing.T) {
	leaktest.Check(t)
	var out bytes.Buffer
	noEnv := func(string) string { return "" }
	if err := run(t.Context(), []string{"-n", "25"}, &out, noEnv); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"publishing 25 orders", "25 accepted, 0 failed", `queue "orders" now holds 25 messages`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestProducerBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"zero orders", []string{"-n", "0"}, nil, "must be positive"},
		{"unknown flag", []string{"-x"}, nil, "flag provided but not defined"},
		{"bad connection string", nil, map[string]string{sbenv.ConnectionStringEnv: "garbage"}, sbenv.ConnectionStringEnv},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t.Context(), tc.args, &bytes.Buffer{}, func(k string) string { return tc.env[k] })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestProducerHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &out, func(string) string { return "" }); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"-n", "-ttl", sbenv.ConnectionStringEnv, sbenv.QueueEnv} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestProducerMetricsAndSpans runs the producer with -metrics-addr and -spans, scrapes
// its Prometheus endpoint with net/http, and finds the sender's metrics; every message
// has its send span.
func TestProducerMetricsAndSpans(t *testing.T) {
	leaktest.Check(t)
	noEnv := func(string) string { return "" }
	run := func(ctx context.Context, args []string, out io.Writer) error { return run(ctx, args, out, noEnv) }
	scrape, output := scrapetest.Run(t, run, []string{"-n", "25", "-metrics-addr", "127.0.0.1:0", "-metrics-hold", "1m", "-spans"},
		"now holds 25 messages")
	scrapetest.Expect(t, scrape, []scrapetest.Sample{
		{Name: "messaging_client_sent_messages_total", Labels: []string{`messaging_destination_name="orders"`, `messaging_operation_name="send"`, `messaging_system="servicebus"`}, Value: "25"},
		{Name: "messaging_client_operation_duration_seconds_count", Labels: []string{`messaging_operation_name="send"`}, Value: "25"},
		{Name: "sbkit_sender_batch_duration_seconds_count", Labels: nil, Value: "*"},
		{Name: "sbkit_sender_inflight_messages", Labels: nil, Value: "0"},
		{Name: "sbkit_sender_inflight_bytes", Labels: nil, Value: "0"},
	})
	sends := 0
	for _, s := range scrapetest.Spans(t, output) {
		if s.Name == "send orders" {
			sends++
		}
	}
	if sends != 25 {
		t.Errorf("%d send spans printed, want 25", sends)
	}
}
