package sbotel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sbkit/sbkit"
	sbotel "github.com/sbkit/sbkit/otel"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// discard is a span processor that drops what it is given: the SDK still builds, samples
// and snapshots every span, as with an exporter, without the memory of a recorder.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// benchModes are the variants every benchmark runs: no hook (the baseline), the hook on
// no-op providers (the globals before an SDK is installed), and the hook on the SDK's
// providers (every span sampled and ended into a discarding processor, metrics into a
// manual reader collected once at the end).
var benchModes = []struct {
	name string
	tel  func() (*sbotel.Telemetry, func(b *testing.B))
}{
	{"without", func() (*sbotel.Telemetry, func(*testing.B)) { return nil, func(*testing.B) {} }},
	{"noop", func() (*sbotel.Telemetry, func(*testing.B)) {
		tel, _ := sbotel.New(&sbotel.Options{TracerProvider: tracenoop.NewTracerProvider(),
			MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}})
		return tel, func(*testing.B) {}
	}},
	{"sdk", func() (*sbotel.Telemetry, func(*testing.B)) { return sdkTelemetry(nil) }},
}

// processorModes adds, for the processor, the SDK without settle spans.
var processorModes = append(benchModes[:len(benchModes):len(benchModes)], struct {
	name string
	tel  func() (*sbotel.Telemetry, func(b *testing.B))
}{"sdk-no-settle-spans", func() (*sbotel.Telemetry, func(*testing.B)) {
	return sdkTelemetry(&sbotel.Options{DisableSettleSpans: true})
}})

// sdkTelemetry is a Telemetry on the SDK's providers (o's other options kept): spans
// into a discarding processor, metrics into a manual reader that the returned function
// collects.
func sdkTelemetry(o *sbotel.Options) (*sbotel.Telemetry, func(*testing.B)) {
	var opts sbotel.Options
	if o != nil {
		opts = *o
	}
	reader := sdkmetric.NewManualReader()
	opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}))
	opts.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	opts.Propagator = propagation.TraceContext{}
	tel, _ := sbotel.New(&opts)
	return tel, func(b *testing.B) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			b.Fatal(err)
		}
	}
}

// nullSender is a batching sbkit.BatchSender that drops what it is sent, so that a
// sender benchmark measures the sender and its hooks, not a broker's memory.
type nullSender struct{ sent atomic.Int64 }

type nullBatch struct {
	n     int32
	bytes uint64
}

func (b *nullBatch) AddMessage(m *azservicebus.Message, _ *azservicebus.AddMessageOptions) error {
	size := uint64(sbkit.MessageSize(m))
	if b.n > 0 && b.bytes+size > 256<<10 {
		return azservicebus.ErrMessageTooLarge
	}
	b.n++
	b.bytes += size
	return nil
}
func (b *nullBatch) NumMessages() int32 { return b.n }
func (b *nullBatch) NumBytes() uint64   { return b.bytes }

func (s *nullSender) SendMessage(context.Context, *azservicebus.Message, *azservicebus.SendMessageOptions) error {
	s.sent.Add(1)
	return nil
}

func (s *nullSender) NewBatch(context.Context, *azservicebus.MessageBatchOptions) (sbkit.Batch, error) {
	return &nullBatch{}, nil
}

func (s *nullSender) SendBatch(_ context.Context, b sbkit.Batch, _ *azservicebus.SendMessageBatchOptions) error {
	s.sent.Add(int64(b.NumMessages()))
	return nil
}

// perMessage reports ns/msg and msgs/s of the timed part (b.N messages).
func perMessage(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/msg")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkSender sends b.N messages of 1 KiB through a batching sender.Sender to a
// destination that drops them at once, so that the hook's cost is hidden neither by
// round trips nor by a broker's work.
func BenchmarkSender(b *testing.B) {
	body := make([]byte, 1024)
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			tel, collect := mode.tel()
			snd := &nullSender{}
			var o sender.Options
			if tel != nil {
				o.Hooks = []sender.Hook{tel.Sender("orders")}
			}
			s, err := sender.New(snd, &o)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			// Each outcome is awaited 4,096 messages later (the window is 1,024), so that
			// sends stay pipelined while memory stays bounded, as in a service, and the
			// benchmark does not measure the heap's growth.
			const lag = 4096
			var ring [lag]*sender.Result
			wait := func(r *sender.Result) {
				if r == nil {
					return
				}
				if err := r.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				r, err := s.SendAsync(ctx, &azservicebus.Message{Body: body})
				if err != nil {
					b.Fatal(err)
				}
				wait(ring[i%lag])
				ring[i%lag] = r
			}
			for _, r := range ring {
				wait(r)
			}
			collect(b)
			b.StopTimer()
			perMessage(b)
			_ = s.Close(ctx)
			if got := snd.sent.Load(); got != int64(b.N) {
				b.Fatalf("%d messages sent, want %d", got, b.N)
			}
		})
	}
}

// BenchmarkProcessor processes b.N messages with 4 handlers that do nothing, on the
// in-memory broker without latency. The messages carry trace context (traceparent and
// Diagnostic-Id) in every variant, so that the broker's work is the same.
func BenchmarkProcessor(b *testing.B) {
	producer := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled})
	tp := traceparent(producer)
	body := make([]byte, 1024)
	for _, mode := range processorModes {
		b.Run(mode.name, func(b *testing.B) {
			tel, collect := mode.tel()
			ns := sbtest.NewTestNamespace(b, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
			q, _ := ns.Entity("orders")
			snd, _ := ns.NewSender("orders", nil)
			ctx := context.Background()
			for range b.N {
				m := &azservicebus.Message{Body: body, ApplicationProperties: map[string]any{"traceparent": tp, "Diagnostic-Id": tp}}
				if err := snd.SendMessage(ctx, m, nil); err != nil {
					b.Fatal(err)
				}
			}
			src, _ := ns.NewReceiverForQueue("orders", nil)
			o := receiver.Options{MaxConcurrency: 4}
			if tel != nil {
				o.Hooks = []receiver.Hook{tel.Processor("orders", "")}
			}
			p, err := receiver.New(src, func(context.Context, *azservicebus.ReceivedMessage) error { return nil }, &o)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			for p.Stats().Completed < int64(b.N) {
				time.Sleep(100 * time.Microsecond)
			}
			collect(b)
			b.StopTimer()
			perMessage(b)
			_ = p.Close(ctx)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			if got := q.Stats().Completed; got != int64(b.N) {
				b.Fatalf("broker completed %d of %d", got, b.N)
			}
		})
	}
}
