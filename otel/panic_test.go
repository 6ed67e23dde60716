package sbotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	sbotel "github.com/sbkit/sbkit/otel"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// panicMeterProvider makes meters whose histograms panic when they record: a broken
// exporter or meter implementation.
type panicMeterProvider struct{ noop.MeterProvider }

func (panicMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return panicMeter{} }

type panicMeter struct{ noop.Meter }

func (panicMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return panicHistogram{}, nil
}

type panicHistogram struct{ noop.Float64Histogram }

func (panicHistogram) Record(context.Context, float64, ...metric.RecordOption) { panic("meter bug") }

// TestPanickingMeterEndsSpans: a hook that fails must not leak what it holds. With a
// meter that panics on every record (the processor recovers hook panics), every process
// span is still ended and dropped from the hook (OnHandlerEnd once recorded first, so 50
// of 50 spans stayed open, each holding its message).
func TestPanickingMeterEndsSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tel, err := sbotel.New(&sbotel.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
			MeterProvider: panicMeterProvider{}})
		if err != nil {
			t.Fatal(err)
		}
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
		snd, _ := ns.NewSender("orders", nil)
		const n = 50
		for i := range n {
			id := fmt.Sprintf("m%d", i)
			if err := snd.SendMessage(context.Background(), &azservicebus.Message{MessageID: &id}, nil); err != nil {
				t.Fatal(err)
			}
		}
		src, _ := ns.NewReceiverForQueue("orders", nil)
		handler := func(_ context.Context, m *azservicebus.ReceivedMessage) error {
			if m.MessageID == "m7" {
				return errors.New("fails") // the failed path records too
			}
			return nil
		}
		p, err := receiver.New(src, handler, &receiver.Options{MaxConcurrency: 4, Hooks: []receiver.Hook{tel.Processor("orders", "")}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		for p.Stats().Handled < n {
			synctest.Wait()
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-done
		ended := 0
		for _, s := range rec.Ended() {
			if s.Name() == "process orders" {
				ended++
			}
		}
		if handled := p.Stats().Handled; int64(ended) != handled || handled < n {
			t.Fatalf("%d process spans ended for %d handler calls", ended, handled)
		}
	})
}
