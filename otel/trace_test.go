package sbotel_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sbkit/sbkit"
	sbotel "github.com/sbkit/sbkit/otel"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// roundTrip sends one message through a Sender with r's hook (inside a "request" span)
// and processes it with a Processor with r's hook. It returns the request span's
// context, the stored message's properties as the broker has them, and the span
// context the handler saw.
func roundTrip(t *testing.T, r *rig, snd sbkit.MessageSender, src sbkit.MessageReceiver) (request, handler trace.SpanContext) {
	t.Helper()
	ctx := context.Background()
	sh := r.tel.Sender("orders")
	s, err := sender.New(snd, &sender.Options{Hooks: []sender.Hook{sh}})
	if err != nil {
		t.Fatal(err)
	}
	reqCtx, req := r.tp.Tracer("test").Start(ctx, "request")
	if err := s.Send(reqCtx, &azservicebus.Message{Body: []byte("hello"), CorrelationID: new("conv-1")}); err != nil {
		t.Fatal(err)
	}
	req.End()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	ph := r.tel.Processor("orders", "")
	seen := make(chan trace.SpanContext, 1)
	p, err := receiver.New(src, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		seen <- trace.SpanContextFromContext(ctx)
		return nil
	}, &receiver.Options{Hooks: []receiver.Hook{ph}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case handler = <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not handled")
	}
	waitFor(t, 30*time.Second, "completion", func() bool { return p.Stats().Completed == 1 })
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return req.SpanContext(), handler
}

// checkRoundTrip checks the spans and metrics of roundTrip: the producer's and the
// consumer's spans are in the request's trace, the process span is the send span's
// child and links to it, the settlement is the process span's child.
func checkRoundTrip(t *testing.T, r *rig, request, handler trace.SpanContext) {
	t.Helper()
	send := r.one(t, "send orders")
	process := r.one(t, "process orders")
	settle := r.one(t, "complete orders")
	if send.SpanKind() != trace.SpanKindProducer || process.SpanKind() != trace.SpanKindConsumer || settle.SpanKind() != trace.SpanKindClient {
		t.Errorf("kinds: send %v, process %v, settle %v", send.SpanKind(), process.SpanKind(), settle.SpanKind())
	}
	tid := request.TraceID()
	for _, s := range []sdktrace.ReadOnlySpan{send, process, settle} {
		if s.SpanContext().TraceID() != tid {
			t.Errorf("span %q in trace %s, want the request's %s", s.Name(), s.SpanContext().TraceID(), tid)
		}
	}
	if send.Parent().SpanID() != request.SpanID() {
		t.Errorf("send span's parent %s, want the request span %s", send.Parent().SpanID(), request.SpanID())
	}
	if process.Parent().SpanID() != send.SpanContext().SpanID() || !process.Parent().IsRemote() {
		t.Errorf("process span's parent %v, want the (remote) send span %s", process.Parent(), send.SpanContext().SpanID())
	}
	if !linkedTo(process, send.SpanContext()) {
		t.Errorf("process span links %v, want a link to the send span", process.Links())
	}
	if settle.Parent().SpanID() != process.SpanContext().SpanID() {
		t.Errorf("settle span's parent %s, want the process span", settle.Parent().SpanID())
	}
	if handler.SpanID() != process.SpanContext().SpanID() {
		t.Errorf("the handler's context carries span %s, want the process span %s", handler.SpanID(), process.SpanContext().SpanID())
	}
	id := attrs(send)["messaging.message.id"]
	if id == "" {
		t.Fatalf("send span without a message id: %v", attrs(send))
	}
	common := []string{"messaging.system=servicebus", "messaging.destination.name=orders"}
	wantAttrs(t, send, append(common, "messaging.operation.name=send", "messaging.operation.type=send",
		"messaging.message.id="+id)...)
	wantAttrs(t, process, append(common, "messaging.operation.name=process", "messaging.operation.type=process",
		"messaging.message.id="+id, "messaging.servicebus.message.delivery_count=1",
		"messaging.servicebus.message.enqueued_time=*", "messaging.message.conversation_id=conv-1")...)
	wantAttrs(t, settle, append(common, "messaging.operation.name=complete", "messaging.operation.type=settle",
		"messaging.servicebus.disposition_status=complete")...)
	if _, ok := attrs(send)["sbkit.attempts"]; ok {
		t.Errorf("sbkit.attempts on a send made in one attempt: %v", attrs(send))
	}

	m := r.metrics(t)
	for _, c := range []struct {
		name string
		got  int64
	}{
		{"messaging.client.sent.messages", m.sum("messaging.client.sent.messages", "messaging.destination.name=orders", "error.type")},
		{"messaging.client.consumed.messages", m.sum("messaging.client.consumed.messages", "messaging.operation.name=receive")},
		{"send duration", m.count("messaging.client.operation.duration", "messaging.operation.name=send")},
		{"complete duration", m.count("messaging.client.operation.duration", "messaging.operation.name=complete", "messaging.operation.type=settle")},
		{"messaging.process.duration", m.count("messaging.process.duration", "messaging.operation.name=process", "error.type")},
		{"outcome complete", m.sum("sbkit.processor.outcomes", "sbkit.outcome=complete")},
	} {
		if c.got != 1 {
			t.Errorf("%s = %d, want 1", c.name, c.got)
		}
	}
	if n := m.count("messaging.client.operation.duration", "messaging.operation.name=receive"); n < 1 {
		t.Errorf("%d receive calls measured", n)
	}
}

// In memory: one message sent through sender and processed by the processor makes a
// send span and a process span in the request's trace.
func TestTraceInMemory(t *testing.T) {
	r := newRig(t, nil)
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
	snd, _ := ns.NewSender("orders", nil)
	src, _ := ns.NewReceiverForQueue("orders", nil)
	request, handler := roundTrip(t, r, snd, src)
	checkRoundTrip(t, r, request, handler)
}

// Through the real SDK client on sbtest.NewServer: the trace context crosses the wire in
// the message's application properties. Nothing is left running after Close.
func TestTraceOnTheWire(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		r := newRig(t, nil)
		srv, err := sbtest.NewServer(&sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close(context.Background())
		client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close(context.Background())
		snd, err := client.NewSender("orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close(context.Background())
		src, err := client.NewReceiverForQueue("orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close(context.Background())
		request, handler := roundTrip(t, r, snd, src)
		checkRoundTrip(t, r, request, handler)
	}()
	for range 2000 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Errorf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
}

// process sends msg with the raw in-memory sender (no hook: another SDK's producer) and
// processes it with r's hook and runCtx; it returns the process span.
func process(t *testing.T, r *rig, runCtx context.Context, msg *azservicebus.Message) sdktrace.ReadOnlySpan {
	t.Helper()
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
	snd, _ := ns.NewSender("orders", nil)
	if err := snd.SendMessage(context.Background(), msg, nil); err != nil {
		t.Fatal(err)
	}
	src, _ := ns.NewReceiverForQueue("orders", nil)
	p, err := receiver.New(src, func(context.Context, *azservicebus.ReceivedMessage) error { return nil },
		&receiver.Options{Hooks: []receiver.Hook{r.tel.Processor("orders", "")}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	waitFor(t, 10*time.Second, "completion", func() bool { return p.Stats().Completed == 1 })
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	return r.one(t, "process orders")
}

// producerContext is a span context as another process's producer made it.
func producerContext(t *testing.T) trace.SpanContext {
	t.Helper()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	if !sc.IsValid() {
		t.Fatal("invalid test context")
	}
	return sc
}

// A message carrying only Diagnostic-Id (as the .NET, Java and Python SDKs write it, and
// older ones write nothing else) or only traceparent joins its producer's trace: the
// process span is its child and links to it. traceparent is read before Diagnostic-Id;
// a Diagnostic-Id in the legacy hierarchical format, or not a string, starts a new trace.
func TestExtract(t *testing.T) {
	producer := producerContext(t)
	for _, c := range []struct {
		name  string
		props map[string]any
		opts  *sbotel.Options
		join  bool
	}{
		{"Diagnostic-Id only", map[string]any{"Diagnostic-Id": traceparent(producer)}, nil, true},
		{"Diagnostic-Id, no global propagator", map[string]any{"Diagnostic-Id": traceparent(producer)},
			&sbotel.Options{Propagator: propagation.NewCompositeTextMapPropagator()}, true},
		{"traceparent only, no global propagator", map[string]any{"traceparent": traceparent(producer)},
			&sbotel.Options{Propagator: propagation.NewCompositeTextMapPropagator()}, true},
		{"traceparent before Diagnostic-Id", map[string]any{"traceparent": traceparent(producer),
			"Diagnostic-Id": "00-11111111111111111111111111111111-2222222222222222-01"}, nil, true},
		{"Diagnostic-Id disabled", map[string]any{"Diagnostic-Id": traceparent(producer)},
			&sbotel.Options{DisableDiagnosticID: true}, false},
		{"legacy hierarchical Diagnostic-Id", map[string]any{"Diagnostic-Id": "|4bf92f35.1."}, nil, false},
		{"not a string", map[string]any{"Diagnostic-Id": int64(7)}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.opts)
			s := process(t, r, context.Background(), &azservicebus.Message{Body: []byte("x"), ApplicationProperties: c.props})
			joined := s.SpanContext().TraceID() == producer.TraceID()
			if joined != c.join {
				t.Fatalf("process span in trace %s, producer's %s: joined %v, want %v", s.SpanContext().TraceID(), producer.TraceID(), joined, c.join)
			}
			if !c.join {
				if s.Parent().IsValid() || len(s.Links()) != 0 {
					t.Errorf("parent %v, links %v; want a root span without links", s.Parent(), s.Links())
				}
				return
			}
			if s.Parent().SpanID() != producer.SpanID() || !linkedTo(s, producer) {
				t.Errorf("parent %v, links %v; want the producer's span as both", s.Parent(), s.Links())
			}
		})
	}
}

// A handler context that already carries a span (Run's ctx had one) keeps it as the
// process span's parent, and the producer is a link; DisableProducerParent links always.
func TestProducerLinkOnly(t *testing.T) {
	producer := producerContext(t)
	props := func() map[string]any { return map[string]any{"traceparent": traceparent(producer)} }
	t.Run("ambient span", func(t *testing.T) {
		r := newRig(t, nil)
		runCtx, worker := r.tp.Tracer("test").Start(context.Background(), "worker")
		defer worker.End()
		s := process(t, r, runCtx, &azservicebus.Message{ApplicationProperties: props()})
		if s.Parent().SpanID() != worker.SpanContext().SpanID() || !linkedTo(s, producer) {
			t.Errorf("parent %v, links %v; want the worker span as parent and a link to the producer", s.Parent(), s.Links())
		}
	})
	t.Run("DisableProducerParent", func(t *testing.T) {
		r := newRig(t, &sbotel.Options{DisableProducerParent: true})
		s := process(t, r, context.Background(), &azservicebus.Message{ApplicationProperties: props()})
		if s.Parent().IsValid() || s.SpanContext().TraceID() == producer.TraceID() || !linkedTo(s, producer) {
			t.Errorf("parent %v, trace %s, links %v; want a new trace linked to the producer", s.Parent(), s.SpanContext().TraceID(), s.Links())
		}
	})
}

// The sender writes the send span's context as traceparent (the propagator's) and as
// Diagnostic-Id; a message that already carries a creation context keeps it, and its
// send span (CLIENT) links to it.
func TestInject(t *testing.T) {
	producer := producerContext(t)
	for _, c := range []struct {
		name   string
		opts   *sbotel.Options
		props  map[string]any
		want   []string // properties that must hold the send span's traceparent
		absent []string
		custom bool
	}{
		{"default", nil, nil, []string{"traceparent", "Diagnostic-Id"}, nil, false},
		{"no propagator", &sbotel.Options{Propagator: propagation.NewCompositeTextMapPropagator()}, nil,
			[]string{"Diagnostic-Id"}, []string{"traceparent"}, false},
		{"Diagnostic-Id disabled", &sbotel.Options{DisableDiagnosticID: true}, map[string]any{"app": "x"},
			[]string{"traceparent"}, []string{"Diagnostic-Id"}, false},
		{"custom creation context", nil, map[string]any{"Diagnostic-Id": traceparent(producer)}, nil, []string{"traceparent"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.opts)
			ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
			q, _ := ns.Entity("orders")
			snd, _ := ns.NewSender("orders", nil)
			s, err := sender.New(snd, &sender.Options{Hooks: []sender.Hook{r.tel.Sender("orders")}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(context.Background(), &azservicebus.Message{Body: []byte("x"), ApplicationProperties: c.props}); err != nil {
				t.Fatal(err)
			}
			_ = s.Close(context.Background())
			span := r.one(t, "send orders")
			got := q.Active()[0].ApplicationProperties
			for _, k := range c.want {
				if got[k] != traceparent(span.SpanContext()) {
					t.Errorf("property %s = %v, want the send span's %s", k, got[k], traceparent(span.SpanContext()))
				}
			}
			for _, k := range c.absent {
				if _, ok := got[k]; ok {
					t.Errorf("property %s = %v, want none", k, got[k])
				}
			}
			if c.custom {
				if got["Diagnostic-Id"] != traceparent(producer) || span.SpanKind() != trace.SpanKindClient || !linkedTo(span, producer) {
					t.Errorf("properties %v, kind %v, links %v: the custom context must stay and be linked", got, span.SpanKind(), span.Links())
				}
			} else if span.SpanKind() != trace.SpanKindProducer {
				t.Errorf("send span kind %v, want PRODUCER", span.SpanKind())
			}
			if c.props != nil && c.props["app"] != nil && got["app"] != "x" {
				t.Errorf("the application's own property was lost: %v", got)
			}
		})
	}
}

// Without providers (the globals, no-op until an SDK is installed) the hooks work and
// still propagate the caller's context through Diagnostic-Id.
func TestNoopProviders(t *testing.T) {
	tel, err := sbotel.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
	q, _ := ns.Entity("orders")
	snd, _ := ns.NewSender("orders", nil)
	s, _ := sender.New(snd, &sender.Options{Hooks: []sender.Hook{tel.Sender("orders")}})
	caller := producerContext(t)
	ctx := trace.ContextWithSpanContext(context.Background(), caller)
	if err := s.Send(ctx, &azservicebus.Message{}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close(ctx)
	if got := q.Active()[0].ApplicationProperties["Diagnostic-Id"]; got != traceparent(caller) {
		t.Errorf("Diagnostic-Id %v, want the caller's context %s", got, traceparent(caller))
	}
}
