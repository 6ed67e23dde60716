package sbotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sender"
)

// BenchmarkHooks measures the hooks alone, per message, on one goroutine: what the
// adapter adds to the work of a sender (start and result) and of a processor (receive,
// handler start and end, settlement), free of broker and scheduling noise.
func BenchmarkHooks(b *testing.B) {
	for _, mode := range benchModes[1:] {
		b.Run("sender/"+mode.name, func(b *testing.B) {
			tel, collect := mode.tel()
			h := tel.Sender("orders")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				m := &azservicebus.Message{MessageID: new("m")}
				mctx := h.OnSendStart(ctx, sender.SendStart{Message: m})
				h.OnSendResult(mctx, sender.SendResult{Message: m, MessageID: "m", Attempts: 1, Duration: time.Millisecond})
			}
			collect(b)
		})
	}
	for _, mode := range processorModes[1:] {
		b.Run("processor/"+mode.name, func(b *testing.B) {
			tel, collect := mode.tel()
			h := tel.Processor("orders", "")
			ctx := context.Background()
			tp := "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				m := &azservicebus.ReceivedMessage{MessageID: "m", DeliveryCount: 1, EnqueuedTime: &now,
					ApplicationProperties: map[string]any{"traceparent": tp, "Diagnostic-Id": tp}}
				h.OnReceive(ctx, receiver.ReceiveCall{Requested: 1, Received: 1, Duration: time.Millisecond})
				hctx := h.OnHandlerStart(ctx, receiver.HandlerStart{Message: m})
				h.OnHandlerEnd(hctx, receiver.HandlerEnd{Message: m, Action: sbkit.ActionComplete, Duration: time.Millisecond})
				h.OnSettle(hctx, receiver.Settlement{Message: m, Action: sbkit.ActionComplete, Attempts: 1, Duration: time.Millisecond})
			}
			collect(b)
		})
	}
}

// BenchmarkSDKSpan is the floor under the SDK rows: one span started and ended with the
// SDK's provider (4 attributes, the discarding processor), nothing else.
func BenchmarkSDKSpan(b *testing.B) {
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{})).Tracer("bench")
	attrs := []attribute.KeyValue{attribute.String("a", "1"), attribute.String("b", "2"),
		attribute.String("c", "3"), attribute.String("d", "4")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tracer.Start(ctx, "span", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
		span.End()
	}
}
