package sbotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sbkit/sbkit/sender"
)

// SenderHook traces and measures the messages of one [sender.Sender]: put it in
// [sender.Options.Hooks]. Make one with [Telemetry.Sender]; attach it to one Sender
// (its entity is the Sender's). It is safe for concurrent use.
//
// Each message gets a send span (kind PRODUCER, named "send <entity>") from the moment
// it is given to the Sender until its outcome, retries and linger included. Unless the
// message already carries a creation context, the span's context is injected into its
// ApplicationProperties and is the message's creation context; a message that carries
// one (for example one sent again after a failure) keeps it, and its send span (kind
// CLIENT) links to it. Retries are span events named "retry".
type SenderHook struct {
	t    *Telemetry
	name string // span name

	producer  []trace.SpanStartOption // a send span whose context is the creation context: kind, attributes
	client    []trace.SpanStartOption // a send span of a message that has one: kind, attributes
	sentOK    []metric.AddOption      // sent.messages: success
	durOK     []metric.RecordOption   // operation.duration: success
	base      []attribute.KeyValue    // entity attributes
	opBase    []attribute.KeyValue    // base + operation name and type
	retryOpts []metric.AddOption
	batchOK   []metric.RecordOption
	gaugeOpt  metric.ObserveOption
}

// Sender returns a hook for a Sender that sends to entity (a queue or a topic).
func (t *Telemetry) Sender(entity string) *SenderHook {
	base := t.entityAttrs(entity, "")
	op := with(base, semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend)
	ok := metric.WithAttributeSet(attribute.NewSet(op...))
	entityOnly := metric.WithAttributeSet(attribute.NewSet(base...))
	startAttrs := trace.WithAttributes(op...)
	return &SenderHook{
		t:         t,
		name:      "send " + entity,
		producer:  []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer), startAttrs},
		client:    []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), startAttrs},
		sentOK:    []metric.AddOption{ok},
		durOK:     []metric.RecordOption{ok},
		base:      base,
		opBase:    op,
		retryOpts: []metric.AddOption{entityOnly},
		batchOK:   []metric.RecordOption{entityOnly},
		gaugeOpt:  entityOnly,
	}
}

// sendSpanKey is the context key of a message's send span, so that the retry and
// result hooks end the span this hook started, whatever other hooks add to the context.
type sendSpanKey struct{ h *SenderHook }

// OnSendStart starts the message's send span and injects its context into the message.
func (h *SenderHook) OnSendStart(ctx context.Context, e sender.SendStart) context.Context {
	m := e.Message
	opts := h.producer
	_, created, custom := h.t.extract(ctx, m.ApplicationProperties)
	if custom {
		opts = []trace.SpanStartOption{h.client[0], h.client[1], trace.WithLinks(trace.Link{SpanContext: created})}
	}
	ctx, span := h.t.tracer.Start(ctx, h.name, opts...)
	if span.IsRecording() && m.MessageID != nil {
		span.SetAttributes(semconv.MessagingMessageID(*m.MessageID))
	}
	if sc := span.SpanContext(); !custom && sc.IsValid() {
		if m.ApplicationProperties == nil {
			m.ApplicationProperties = make(map[string]any, 3)
		}
		h.t.inject(ctx, sc, m.ApplicationProperties)
	}
	return context.WithValue(ctx, sendSpanKey{h}, span)
}

// OnSendRetry adds a "retry" event to the message's span and counts the retry.
func (h *SenderHook) OnSendRetry(ctx context.Context, e sender.SendRetry) {
	h.t.retries.Add(ctx, 1, h.retryOpts...)
	if span, ok := ctx.Value(sendSpanKey{h}).(trace.Span); ok && span.IsRecording() {
		span.AddEvent("retry", trace.WithAttributes(
			attribute.Int("sbkit.retry.attempt", e.Attempt),
			attribute.Float64("sbkit.retry.delay", e.Delay.Seconds()),
			errorAttr(e.Err),
			attribute.String("exception.message", e.Err.Error()),
		))
	}
}

// OnSendResult ends the message's span with the outcome and records it: in
// messaging.client.sent.messages and messaging.client.operation.duration for an accepted
// message, in sbkit.sender.rejected for one that was not accepted.
func (h *SenderHook) OnSendResult(ctx context.Context, e sender.SendResult) {
	switch {
	case e.Rejected:
		h.t.rejected.Add(ctx, 1, metric.WithAttributeSet(set(h.base, errorAttr(e.Err))))
	case e.Err == nil:
		h.t.sent.Int64Counter.Add(ctx, 1, h.sentOK...)
		h.t.opDur.Float64Histogram.Record(ctx, e.Duration.Seconds(), h.durOK...)
	default:
		failed := set(h.opBase, errorAttr(e.Err))
		h.t.sent.AddSet(ctx, 1, failed)
		h.t.opDur.RecordSet(ctx, e.Duration.Seconds(), failed)
	}
	span, ok := ctx.Value(sendSpanKey{h}).(trace.Span)
	if !ok {
		return
	}
	if span.IsRecording() && (e.Attempts != 1 || e.Err != nil) { // one attempt: the common case, no attribute
		span.SetAttributes(AttemptsKey.Int(e.Attempts))
		if e.Err != nil {
			span.SetAttributes(errorAttr(e.Err))
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, e.Err.Error())
		}
	}
	span.End()
}

// OnSendBatch records the batch request's duration in sbkit.sender.batch.duration.
func (h *SenderHook) OnSendBatch(ctx context.Context, e sender.SendBatch) {
	if e.Err == nil {
		h.t.batchDur.Record(ctx, e.Duration.Seconds(), h.batchOK...)
		return
	}
	h.t.batchDur.Record(ctx, e.Duration.Seconds(), metric.WithAttributeSet(set(h.base, errorAttr(e.Err))))
}

// Observe reports s's gauges, sbkit.sender.inflight.messages and
// sbkit.sender.inflight.bytes, with h's attributes, whenever the meter collects, until
// the returned registration is unregistered.
func (h *SenderHook) Observe(s *sender.Sender) (metric.Registration, error) {
	return h.t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveInt64(h.t.senderMsgs, st.InFlightMessages, h.gaugeOpt)
		o.ObserveInt64(h.t.senderBytes, st.InFlightBytes, h.gaugeOpt)
		return nil
	}, h.t.senderMsgs, h.t.senderBytes)
}
