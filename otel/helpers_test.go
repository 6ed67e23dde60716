package sbotel_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	sbotel "github.com/sbkit/sbkit/otel"
	"github.com/sbkit/sbkit/sbtest"
)

// rig is a Telemetry on the SDK's providers, with an in-memory span recorder and a
// manual metric reader.
type rig struct {
	rec    *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	tel    *sbotel.Telemetry
}

// newRig returns a rig; o (nil for defaults) gets the rig's providers and, unless it
// has one, the W3C Trace Context propagator (the tests never touch the globals).
func newRig(t testing.TB, o *sbotel.Options) *rig {
	t.Helper()
	r := &rig{rec: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.rec))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	var opts sbotel.Options
	if o != nil {
		opts = *o
	}
	opts.TracerProvider, opts.MeterProvider = r.tp, mp
	if opts.Propagator == nil {
		opts.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	tel, err := sbotel.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	r.tel = tel
	return r
}

// spans returns the ended spans named name.
func (r *rig) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only ended span named name, failing the test otherwise.
func (r *rig) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	ss := r.spans(name)
	if len(ss) != 1 {
		var names []string
		for _, s := range r.rec.Ended() {
			names = append(names, s.Name())
		}
		t.Fatalf("%d spans named %q; ended spans: %v", len(ss), name, names)
	}
	return ss[0]
}

// metrics collects the metrics now.
func (r *rig) metrics(t testing.TB) metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	m := metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			m[x.Name] = x
		}
	}
	return m
}

// metrics are collected metrics by name.
type metrics map[string]metricdata.Metrics

// match reports whether set has every key=value of want ("key" alone: the key is
// absent; "key=*": present with any value).
func match(set attribute.Set, want []string) bool {
	for _, w := range want {
		k, v, eq := cut(w)
		got, ok := set.Value(attribute.Key(k))
		switch {
		case !eq && ok, eq && !ok:
			return false
		case eq && v != "*" && got.String() != v:
			return false
		}
	}
	return true
}

func cut(s string) (k, v string, eq bool) {
	for i := range len(s) {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// sum adds the points of the int64 sum name whose attributes match want.
func (m metrics) sum(name string, want ...string) int64 {
	var n int64
	switch d := m[name].Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes, want) {
				n += p.Value
			}
		}
	}
	return n
}

// count adds the counts of the histogram name whose attributes match want.
func (m metrics) count(name string, want ...string) int64 {
	var n uint64
	if d, ok := m[name].Data.(metricdata.Histogram[float64]); ok {
		for _, p := range d.DataPoints {
			if match(p.Attributes, want) {
				n += p.Count
			}
		}
	}
	return int64(n)
}

// attrs returns a span's attributes as strings.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// wantAttrs fails the test unless s has every key=value of want.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want ...string) {
	t.Helper()
	got := attrs(s)
	for _, w := range want {
		k, v, _ := cut(w)
		if g, ok := got[k]; !ok || (v != "*" && g != v) {
			t.Errorf("span %q: %s = %q (present %v), want %q; all: %v", s.Name(), k, g, ok, v, got)
		}
	}
}

// events returns the names of a span's events.
func events(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name)
	}
	return out
}

// hasEvent reports whether s has an event named name.
func hasEvent(s sdktrace.ReadOnlySpan, name string) bool { return slices.Contains(events(s), name) }

// linkedTo reports whether s links to sc.
func linkedTo(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	sbtest.Eventually(t, d, what, cond)
}

// traceparent formats sc as W3C traceparent.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}
