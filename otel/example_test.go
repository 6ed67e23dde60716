package sbotel_test

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	sbotel "github.com/sbkit/sbkit/otel"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// A producer and a worker, traced and measured. In a service, the providers are the
// ones your OpenTelemetry setup installs (sbotel.New(nil) takes the globals); here they
// record in memory.
func Example() {
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tel, _ := sbotel.New(&sbotel.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		Propagator:     propagation.TraceContext{},
	})

	ns := sbtest.NewNamespace(nil) // with the SDK: client.NewSender("orders", nil), ...
	queue, _ := ns.NewQueue("orders", nil)
	sdkSender, _ := ns.NewSender("orders", nil)
	sdkReceiver, _ := ns.NewReceiverForQueue("orders", nil)

	// The producer: a span per message; its context travels in the message.
	sh := tel.Sender("orders")
	s, _ := sender.New(sdkSender, &sender.Options{Hooks: []sender.Hook{sh}})
	reg, _ := sh.Observe(s) // in-flight gauges
	_ = s.Send(context.Background(), &azservicebus.Message{Body: []byte("order 1")})
	_ = s.Close(context.Background())
	_ = reg.Unregister()

	// The worker: a span per handler call, in the producer's trace.
	ph := tel.Processor("orders", "")
	p, _ := receiver.New(sdkReceiver, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		return nil // ctx carries the process span: the handler's own spans are its children
	}, &receiver.Options{Hooks: []receiver.Hook{ph}})
	reg, _ = ph.Observe(p)
	go func() { _ = p.Run(context.Background()) }()
	_ = queue.WaitDrained(context.Background())
	_ = p.Close(context.Background())
	_ = reg.Unregister()

	ended := spans.Ended()
	send := ended[0]
	for _, span := range ended {
		fmt.Printf("%-16s %-8s same trace as the send: %v\n", span.Name(), span.SpanKind(),
			span.SpanContext().TraceID() == send.SpanContext().TraceID())
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && sum.IsMonotonic {
			for _, dp := range sum.DataPoints {
				outcome, _ := dp.Attributes.Value("sbkit.outcome")
				fmt.Println(m.Name, outcome.String(), dp.Value)
			}
		}
	}
	// Output:
	// send orders      producer same trace as the send: true
	// process orders   consumer same trace as the send: true
	// complete orders  client   same trace as the send: true
	// messaging.client.sent.messages  1
	// messaging.client.consumed.messages  1
	// sbkit.processor.outcomes complete 1
}
