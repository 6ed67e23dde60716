package sbotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/locks"
	"github.com/sbkit/sbkit/receiver"
)

// ProcessorHook traces and measures the messages of one [receiver.Processor] or
// [receiver.SessionProcessor]: put it in [receiver.Options.Hooks] (the processor then
// also hands it the lock engine's events), and in [dedupe.Options.Hooks] when the
// handler is wrapped by a [dedupe.Filter]. Make one with [Telemetry.Processor]. It is
// safe for concurrent use.
//
// Each handler call gets a process span (kind CONSUMER, named "process <entity>") whose
// parent is the producer's span and which links to it (see the package documentation
// and [Options.DisableProducerParent]); the handler's context carries it, so the
// handler's own spans are its children. Lock renewals, failed renewals and a lost lock
// while the handler runs are events on it ("lock renewed", "lock renew failed", "lock
// lost"; those of a message still waiting in the buffer are only counted), and so are the
// duplicate filter's decisions ("duplicate", "contended", "lease lost", "dedupe store
// error"). Each settlement is a span of its own (kind CLIENT, named "<operation>
// <entity>", e.g. "complete orders"), child of the process span, with
// messaging.servicebus.disposition_status and, for a dead-letter, its reason.
type ProcessorHook struct {
	t           *Telemetry
	entity      string
	processName string

	startAttrs   []attribute.KeyValue // process span, messaging.process.duration
	processOpts  []trace.SpanStartOption
	base         []attribute.KeyValue
	consumed     []metric.AddOption
	receiveOK    []metric.RecordOption
	receiveOp    []attribute.KeyValue
	processOK    []metric.RecordOption
	settle       [5]settleAttrs // by sbkit.Action
	outcomes     map[string][]metric.AddOption
	errSources   [6][]metric.AddOption // by receiver.ErrorSource
	kinds        [2][]metric.AddOption // renewals: message, session
	dedupe       map[string][]metric.AddOption
	redeliveries map[string][]metric.AddOption
	breaker      [3][]metric.AddOption // by receiver.BreakerState
	gaugeOpt     metric.ObserveOption

	spans sync.Map // *azservicebus.ReceivedMessage -> trace.Span, while its handler runs (recording spans only)
}

type settleAttrs struct {
	name     string
	ok       []metric.RecordOption
	opAttrs  []attribute.KeyValue    // base + operation name and type
	spanOpts []trace.SpanStartOption // kind CLIENT, opAttrs + disposition status
	fails    []metric.AddOption
	outcome  []metric.AddOption // sbkit.processor.outcomes of a settled message
}

// Processor returns a hook for a processor that receives from entity (a queue, or the
// topic of subscription; subscription is "" for a queue).
func (t *Telemetry) Processor(entity, subscription string) *ProcessorHook {
	base := t.entityAttrs(entity, subscription)
	h := &ProcessorHook{
		t:            t,
		entity:       entity,
		processName:  "process " + entity,
		base:         base,
		outcomes:     make(map[string][]metric.AddOption),
		dedupe:       make(map[string][]metric.AddOption),
		redeliveries: make(map[string][]metric.AddOption),
		gaugeOpt:     metric.WithAttributeSet(attribute.NewSet(base...)),
	}
	h.startAttrs = with(base, semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess)
	h.processOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(h.startAttrs...)}
	h.consumed = []metric.AddOption{metric.WithAttributeSet(set(base, semconv.MessagingOperationName("receive")))}
	h.receiveOp = with(base, semconv.MessagingOperationName("receive"), semconv.MessagingOperationTypeReceive)
	h.receiveOK = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(h.receiveOp...))}
	h.processOK = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(h.startAttrs...))}
	for a, status := range map[sbkit.Action]attribute.KeyValue{
		sbkit.ActionComplete:   semconv.MessagingServiceBusDispositionStatusComplete,
		sbkit.ActionAbandon:    semconv.MessagingServiceBusDispositionStatusAbandon,
		sbkit.ActionDeadLetter: semconv.MessagingServiceBusDispositionStatusDeadLetter,
		sbkit.ActionDefer:      semconv.MessagingServiceBusDispositionStatusDefer,
	} {
		op := status.Value.AsString()
		opAttrs := with(base, semconv.MessagingOperationName(op), semconv.MessagingOperationTypeSettle)
		opSet := metric.WithAttributeSet(attribute.NewSet(opAttrs...))
		h.settle[a] = settleAttrs{
			name:    op + " " + entity,
			ok:      []metric.RecordOption{opSet},
			opAttrs: opAttrs,
			spanOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(with(opAttrs, status)...)},
			fails:   []metric.AddOption{opSet},
			outcome: []metric.AddOption{metric.WithAttributeSet(set(base, OutcomeKey.String(op)))},
		}
	}
	for _, o := range []string{"lock_lost", "left_locked", "dropped", "redelivered"} {
		h.outcomes[o] = []metric.AddOption{metric.WithAttributeSet(set(base, OutcomeKey.String(o)))}
	}
	for s := receiver.SourceReceive; s <= receiver.SourceAccept; s++ {
		h.errSources[s] = []metric.AddOption{metric.WithAttributeSet(set(base, ErrorSourceKey.String(s.String())))}
	}
	for k, attr := range lockKinds {
		h.kinds[k] = []metric.AddOption{metric.WithAttributeSet(set(base, attr))}
	}
	for _, o := range []string{"fresh", "duplicate", "contended", "lease_lost"} {
		h.dedupe[o] = []metric.AddOption{metric.WithAttributeSet(set(base, DedupeOutcomeKey.String(o)))}
	}
	for _, o := range []string{"scheduled", "schedule_failed", "exhausted"} {
		h.redeliveries[o] = []metric.AddOption{metric.WithAttributeSet(set(base, RedeliveryOutcomeKey.String(o)))}
	}
	for _, s := range []receiver.BreakerState{receiver.BreakerClosed, receiver.BreakerOpen, receiver.BreakerHalfOpen} {
		h.breaker[s] = []metric.AddOption{metric.WithAttributeSet(set(base, BreakerStateKey.String(s.String())))}
	}
	return h
}

// OnReceive records the ReceiveMessages call: messaging.client.consumed.messages and
// messaging.client.operation.duration (operation receive).
func (h *ProcessorHook) OnReceive(ctx context.Context, e receiver.ReceiveCall) {
	if e.Received > 0 {
		h.t.consumed.Int64Counter.Add(ctx, int64(e.Received), h.consumed...)
	}
	if e.Err == nil {
		h.t.opDur.Float64Histogram.Record(ctx, e.Duration.Seconds(), h.receiveOK...)
		return
	}
	h.t.opDur.RecordSet(ctx, e.Duration.Seconds(), set(h.receiveOp, errorAttr(e.Err)))
}

// OnHandlerStart starts the message's process span and returns the handler's context,
// which carries it.
func (h *ProcessorHook) OnHandlerStart(ctx context.Context, e receiver.HandlerStart) context.Context {
	m := e.Message
	ctx, producer, found := h.t.extract(ctx, m.ApplicationProperties)
	parent := ctx
	opts := h.processOpts
	if found {
		if !h.t.opts.DisableProducerParent && !trace.SpanContextFromContext(ctx).IsValid() {
			parent = trace.ContextWithRemoteSpanContext(ctx, producer)
		}
		opts = []trace.SpanStartOption{opts[0], opts[1], trace.WithLinks(trace.Link{SpanContext: producer})}
	}
	ctx, span := h.t.tracer.Start(parent, h.processName, opts...)
	if !span.IsRecording() {
		return ctx // sampled out, or no-op: nothing more to record
	}
	span.SetAttributes(messageAttrs(m)...)
	h.spans.Store(m, span)
	return context.WithValue(ctx, recordedKey{h}, true)
}

// recordedKey marks the context of a recorded process span of a hook, so that its
// settlement gets a span too.
type recordedKey struct{ h *ProcessorHook }

// messageAttrs are the attributes of a process span that describe its message.
func messageAttrs(m *azservicebus.ReceivedMessage) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 6)
	kv = append(kv, semconv.MessagingMessageID(m.MessageID))
	if m.DeliveryCount > 0 {
		kv = append(kv, semconv.MessagingServiceBusMessageDeliveryCount(int(m.DeliveryCount)))
	}
	if m.EnqueuedTime != nil {
		kv = append(kv, semconv.MessagingServiceBusMessageEnqueuedTime(int(m.EnqueuedTime.Unix())))
	}
	if m.CorrelationID != nil {
		kv = append(kv, semconv.MessagingMessageConversationID(*m.CorrelationID))
	}
	if m.SessionID != nil {
		kv = append(kv, SessionIDKey.String(*m.SessionID))
	}
	if attempt, _ := sbkit.RedeliveryOf(m); attempt > 0 {
		kv = append(kv, RedeliveryAttemptKey.Int(attempt))
	}
	return kv
}

// OnHandlerEnd ends the process span and records messaging.process.duration; a handler
// error (or panic) that abandons the message sets error.type and the span's status. The
// span leaves the hook and ends first, whatever happens to the recording (a meter that
// panics must not keep spans, and their messages, in the hook).
func (h *ProcessorHook) OnHandlerEnd(ctx context.Context, e receiver.HandlerEnd) {
	failed := e.Err != nil && e.Action == sbkit.ActionAbandon
	if v, ok := h.spans.LoadAndDelete(e.Message); ok {
		defer endProcessSpan(v.(trace.Span), failed, e.Err)
	}
	if failed {
		h.t.processDu.RecordSet(ctx, e.Duration.Seconds(), set(h.startAttrs, errorAttr(e.Err)))
	} else {
		h.t.processDu.Float64Histogram.Record(ctx, e.Duration.Seconds(), h.processOK...)
	}
}

// endProcessSpan ends a process span, with the handler's error when it failed.
func endProcessSpan(span trace.Span, failed bool, err error) {
	if failed {
		span.SetAttributes(errorAttr(err))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// OnSettle records the settlement: a settle span, messaging.client.operation.duration
// (operation complete, abandon, dead_letter or defer), sbkit.processor.outcomes when it
// succeeded, sbkit.processor.settle.failures for its failed calls.
func (h *ProcessorHook) OnSettle(ctx context.Context, e receiver.Settlement) {
	if e.Action < sbkit.ActionComplete || e.Action > sbkit.ActionDefer {
		return
	}
	s := &h.settle[e.Action]
	failures := e.Attempts
	if e.Err == nil {
		failures--
		if e.Redelivered {
			h.t.outcomes.Add(ctx, 1, h.outcomes["redelivered"]...)
		} else {
			h.t.outcomes.Add(ctx, 1, s.outcome...)
		}
		h.t.opDur.Float64Histogram.Record(ctx, e.Duration.Seconds(), s.ok...)
	} else {
		h.t.opDur.RecordSet(ctx, e.Duration.Seconds(), set(s.opAttrs, errorAttr(e.Err)))
	}
	if failures > 0 {
		h.t.settleFails.Add(ctx, int64(failures), s.fails...)
	}
	if h.t.opts.DisableSettleSpans || ctx.Value(recordedKey{h}) == nil {
		return // no settle span under a process span that was not recorded
	}
	end := time.Now()
	_, span := h.t.tracer.Start(ctx, s.name, s.spanOpts[0], s.spanOpts[1], trace.WithTimestamp(end.Add(-e.Duration)))
	if span.IsRecording() { // the message's id is on the parent, the process span
		if e.Attempts != 1 {
			span.SetAttributes(AttemptsKey.Int(e.Attempts))
		}
		if e.DeadLetterReason != "" {
			span.SetAttributes(DeadLetterReasonKey.String(e.DeadLetterReason))
		}
		if e.Err != nil {
			span.SetAttributes(errorAttr(e.Err))
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, e.Err.Error())
		}
	}
	span.End(trace.WithTimestamp(end))
}

// OnError counts the error in sbkit.processor.errors by source, and in
// sbkit.processor.outcomes when it ends a message: lock_lost, left_locked, dropped.
func (h *ProcessorHook) OnError(ctx context.Context, e *receiver.Error) {
	if e.Source >= receiver.SourceReceive && e.Source <= receiver.SourceAccept {
		h.t.procErrors.Add(ctx, 1, h.errSources[e.Source]...)
	}
	if o := outcomeOf(e); o != "" {
		h.t.outcomes.Add(ctx, 1, h.outcomes[o]...)
	}
}

// outcomeOf is the outcome an error reports for its message, if it ends one: the
// processor reports each message it could not settle exactly once, as left locked by a
// shutdown's deadline (ErrLeftLocked), dropped (ErrDropped), or lost (a *locks.LostError
// from the lock, or a settlement that failed for good, ErrSettleFailed).
func outcomeOf(e *receiver.Error) string {
	var lost *locks.LostError
	switch {
	case e.Message == nil:
		return "" // a session's lock, or no message at all
	case errors.Is(e.Err, receiver.ErrLeftLocked):
		return "left_locked"
	case errors.Is(e.Err, receiver.ErrDropped):
		return "dropped"
	case e.Source == receiver.SourceSettle && errors.Is(e.Err, receiver.ErrSettleFailed):
		return "lock_lost"
	case e.Source == receiver.SourceRenew && errors.As(e.Err, &lost):
		return "lock_lost"
	}
	return ""
}

// span returns the process span of m while its handler runs, if it is recording.
func (h *ProcessorHook) span(m *azservicebus.ReceivedMessage) (trace.Span, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := h.spans.Load(m)
	if !ok {
		return nil, false
	}
	return v.(trace.Span), true
}

// kind is the lock's index in lockKinds (and ProcessorHook.kinds): a lock event
// without a message is a session's.
func kind(m *azservicebus.ReceivedMessage) int {
	if m == nil {
		return 1
	}
	return 0
}

// lockKinds are the sbkit.lock.kind attributes, by kind.
var lockKinds = [2]attribute.KeyValue{LockKindKey.String("message"), LockKindKey.String("session")}

func kindAttr(m *azservicebus.ReceivedMessage) attribute.KeyValue { return lockKinds[kind(m)] }

// OnRenew counts the renewal (sbkit.lock.renewals) and adds a "lock renewed" event to
// the message's process span.
func (h *ProcessorHook) OnRenew(ctx context.Context, e locks.Renewal) {
	h.t.renewals.Add(ctx, 1, h.kinds[kind(e.Message)]...)
	if span, ok := h.span(e.Message); ok {
		span.AddEvent("lock renewed", trace.WithAttributes(
			attribute.String("sbkit.lock.locked_until", e.LockedUntil.UTC().Format(time.RFC3339Nano)),
			attribute.Int("sbkit.lock.renewals", e.Renewals)))
	}
}

// OnRenewError counts the failed attempt (sbkit.lock.renew.failures) and adds a "lock
// renew failed" event to the message's process span.
func (h *ProcessorHook) OnRenewError(ctx context.Context, e *locks.RenewError) {
	h.t.renewFailures.Add(ctx, 1, metric.WithAttributeSet(set(h.base, kindAttr(e.Message), errorAttr(e.Err))))
	if span, ok := h.span(e.Message); ok {
		span.AddEvent("lock renew failed", trace.WithAttributes(
			attribute.Int("sbkit.lock.attempt", e.Attempt),
			attribute.Bool("sbkit.lock.will_retry", e.WillRetry),
			errorAttr(e.Err),
			attribute.String("exception.message", e.Err.Error())))
	}
}

// OnLockLost counts the lost lock (sbkit.lock.lost, by reason) and adds a "lock lost"
// event to the message's process span.
func (h *ProcessorHook) OnLockLost(ctx context.Context, e locks.LockLoss) {
	reason := lostReason(e.Cause)
	h.t.locksLost.Add(ctx, 1, metric.WithAttributeSet(set(h.base, kindAttr(e.Message), LockLostReasonKey.String(reason))))
	if span, ok := h.span(e.Message); ok {
		span.AddEvent("lock lost", trace.WithAttributes(LockLostReasonKey.String(reason)))
	}
}

// lostReason names a lock loss's reason for the sbkit.lock.lost_reason attribute.
func lostReason(e *locks.LostError) string {
	if e == nil {
		return "unknown"
	}
	switch e.Reason {
	case locks.ReasonLockLost:
		return "lock_lost"
	case locks.ReasonExpired:
		return "expired"
	case locks.ReasonConnectionLost:
		return "connection_lost"
	case locks.ReasonLimit:
		return "limit"
	case locks.ReasonRenewFailed:
		return "renew_failed"
	}
	return "unknown"
}

// OnFresh counts a delivery whose key was free (sbkit.dedupe.outcomes, fresh).
func (h *ProcessorHook) OnFresh(ctx context.Context, _ dedupe.Fresh) {
	h.t.dedupe.Add(ctx, 1, h.dedupe["fresh"]...)
}

// OnDuplicate counts a skipped duplicate and adds a "duplicate" event to the process span.
func (h *ProcessorHook) OnDuplicate(ctx context.Context, _ dedupe.Duplicate) {
	h.t.dedupe.Add(ctx, 1, h.dedupe["duplicate"]...)
	trace.SpanFromContext(ctx).AddEvent("duplicate")
}

// OnContended counts a contended delivery and adds a "contended" event to the process span.
func (h *ProcessorHook) OnContended(ctx context.Context, e dedupe.Contended) {
	h.t.dedupe.Add(ctx, 1, h.dedupe["contended"]...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		policy := "wait"
		if e.Policy == dedupe.ContendedAbandon {
			policy = "abandon"
		}
		span.AddEvent("contended", trace.WithAttributes(attribute.String("sbkit.dedupe.policy", policy)))
	}
}

// OnLeaseLost counts a lost lease and adds a "lease lost" event to the process span.
func (h *ProcessorHook) OnLeaseLost(ctx context.Context, _ dedupe.LeaseLost) {
	h.t.dedupe.Add(ctx, 1, h.dedupe["lease_lost"]...)
	trace.SpanFromContext(ctx).AddEvent("lease lost")
}

// OnStoreError counts a failed store call (sbkit.dedupe.outcomes, store_error, with the
// operation) and adds a "dedupe store error" event to the process span.
func (h *ProcessorHook) OnStoreError(ctx context.Context, err *dedupe.StoreError) {
	op := DedupeOperationKey.String(string(err.Op))
	h.t.dedupe.Add(ctx, 1, metric.WithAttributeSet(set(h.base, DedupeOutcomeKey.String("store_error"), op)))
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("dedupe store error", trace.WithAttributes(op, attribute.Int("sbkit.dedupe.attempt", err.Attempt),
			errorAttr(err.Err), attribute.String("exception.message", err.Error())))
	}
}

// Observe reports p's gauges, sbkit.processor.handlers.running,
// sbkit.processor.messages.buffered and sbkit.processor.messages.held, with h's
// attributes, whenever the meter collects, until the returned registration is
// unregistered.
func (h *ProcessorHook) Observe(p *receiver.Processor) (metric.Registration, error) {
	return h.t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		h.observe(o, p.Stats())
		return nil
	}, h.t.running, h.t.buffered, h.t.held)
}

// ObserveSessions is Observe for a SessionProcessor, with sbkit.processor.sessions.held too.
func (h *ProcessorHook) ObserveSessions(p *receiver.SessionProcessor) (metric.Registration, error) {
	return h.t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := p.Stats()
		h.observe(o, st.Stats)
		o.ObserveInt64(h.t.sessions, st.Sessions, h.gaugeOpt)
		return nil
	}, h.t.running, h.t.buffered, h.t.held, h.t.sessions)
}

func (h *ProcessorHook) observe(o metric.Observer, st receiver.Stats) {
	o.ObserveInt64(h.t.running, st.InFlight, h.gaugeOpt)
	o.ObserveInt64(h.t.buffered, st.Buffered, h.gaugeOpt)
	o.ObserveInt64(h.t.held, st.Held, h.gaugeOpt)
}

// OnRedelivery counts the delayed redelivery decision in sbkit.processor.redeliveries
// (sbkit.redelivery.outcome scheduled, schedule_failed or exhausted). The copy's own
// process span carries its attempt (sbkit.redelivery.attempt).
func (h *ProcessorHook) OnRedelivery(ctx context.Context, e receiver.Redelivery) {
	o := "scheduled"
	switch {
	case e.Exhausted:
		o = "exhausted"
	case e.Err != nil:
		o = "schedule_failed"
	}
	h.t.redeliveries.Add(ctx, 1, h.redeliveries[o]...)
}

// OnBreakerChange counts the circuit breaker's change in sbkit.processor.breaker.changes
// by the state entered (sbkit.breaker.state).
func (h *ProcessorHook) OnBreakerChange(ctx context.Context, e receiver.BreakerChange) {
	if e.To >= receiver.BreakerClosed && e.To <= receiver.BreakerHalfOpen {
		h.t.breaker.Add(ctx, 1, h.breaker[e.To]...)
	}
}
