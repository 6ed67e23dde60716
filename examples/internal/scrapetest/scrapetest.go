// Package scrapetest runs an example program with -metrics-addr in a test and scrapes
// its Prometheus endpoint with net/http, as Prometheus would.
package scrapetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Output is an io.Writer for a program's output that tests can read while it runs.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

var metricsURL = regexp.MustCompile(`metrics: (http://\S+/metrics)`)

// Run starts run (a program's run function) with args in a goroutine and waits until its
// output holds done; then it scrapes the metrics endpoint the program printed, cancels
// the program (ending its -metrics-hold) and waits for it. It returns the scrape and the
// output.
func Run(t *testing.T, run func(ctx context.Context, args []string, out io.Writer) error, args []string, done string) (scrape, output string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &Output{}
	result := make(chan error, 1)
	go func() { result <- run(ctx, args, out) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), done) {
		select {
		case err := <-result:
			t.Fatalf("the program ended before %q: %v\n%s", done, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after 30s:\n%s", done, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := metricsURL.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no metrics URL in the output:\n%s", out.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", m[1], resp.Status, err)
	}
	cancel()
	if err := <-result; err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return string(body), out.String()
}

// Value returns the value of the first sample of metric name in scrape whose labels
// include every one of labels (each as `key="value"`); ok is false when there is none.
func Value(scrape, name string, labels ...string) (value string, ok bool) {
	for _, l := range strings.Split(scrape, "\n") {
		rest, found := strings.CutPrefix(l, name)
		if !found || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		all := true
		for _, lb := range labels {
			all = all && strings.Contains(rest, lb)
		}
		if all {
			return rest[strings.LastIndexByte(rest, ' ')+1:], true
		}
	}
	return "", false
}

// Sample is an expected sample of a scrape: a metric name, labels it must have (each as
// `key="value"`) and its value ("*": any).
type Sample struct {
	Name   string
	Labels []string
	Value  string
}

// Expect fails t unless scrape has every sample of want, and then logs the scrape.
func Expect(t *testing.T, scrape string, want []Sample) {
	t.Helper()
	for _, w := range want {
		got, ok := Value(scrape, w.Name, w.Labels...)
		if !ok || (w.Value != "*" && got != w.Value) {
			t.Errorf("%s%v = %q (found %v), want %s", w.Name, w.Labels, got, ok, w.Value)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", scrape)
	}
}

// Span is what a test reads of a span printed by -spans.
type Span struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
}

// Spans returns the spans printed in output (the lines that are JSON objects).
func Spans(t *testing.T, output string) []Span {
	t.Helper()
	var spans []Span
	for _, l := range strings.Split(output, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var s Span
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("span %q: %v", l, err)
		}
		spans = append(spans, s)
	}
	return spans
}
