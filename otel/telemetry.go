package sbotel

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter: the module path.
const ScopeName = "github.com/sbkit/sbkit/otel"

// ErrInvalidOptions is wrapped by [New]'s errors for options it cannot use.
var ErrInvalidOptions = errors.New("sbotel: invalid options")

// Options configure a [Telemetry]. A nil *Options and the zero value mean the defaults.
type Options struct {
	// TracerProvider makes the tracer. Default: the global one ([otel.GetTracerProvider]),
	// looked up once, by New.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter. Default: the global one ([otel.GetMeterProvider]),
	// looked up once, by New.
	MeterProvider metric.MeterProvider
	// Propagator writes trace context into a sent message's ApplicationProperties and
	// reads it from a received one's. Default: the global one
	// ([otel.GetTextMapPropagator]), which follows a later otel.SetTextMapPropagator. The
	// Diagnostic-Id property is written and read whatever the propagator (see the package
	// documentation), so traces join across processes even when no global propagator is
	// set.
	Propagator propagation.TextMapPropagator
	// ServerAddress is the namespace's host name, recorded as server.address on spans and
	// metrics, e.g. "contoso.servicebus.windows.net". Default: not recorded.
	ServerAddress string
	// DisableDiagnosticID stops writing and reading the Diagnostic-Id application
	// property. Default false: it is written on every message that carries no trace
	// context yet, and read when the propagator finds no context.
	DisableDiagnosticID bool
	// DisableProducerParent makes a process span only link to the producer's context,
	// never take it as its parent. Default false: a process span is the child of the
	// producer's span (one trace from producer to consumer) unless the handler's context
	// already carries a span, in which case it stays that span's child and links to the
	// producer's.
	DisableProducerParent bool
	// DisableSettleSpans stops making a span per settlement; settlements are still
	// measured. Default false: each settlement of a recorded process span is a span of
	// its own, as the conventions recommend (it costs about as much as the process span;
	// see the README's numbers).
	DisableSettleSpans bool
}

// Telemetry turns sbkit's hooks into OpenTelemetry spans and metrics: make one with
// [New], then a [SenderHook] per sender ([Telemetry.Sender]) and a [ProcessorHook] per
// processor ([Telemetry.Processor]). A Telemetry is safe for concurrent use and owns no
// goroutine.
type Telemetry struct {
	tracer     trace.Tracer
	meter      metric.Meter
	propagator propagation.TextMapPropagator
	opts       Options

	// Semantic-conventions instruments.
	sent      messagingconv.ClientSentMessages
	consumed  messagingconv.ClientConsumedMessages
	opDur     messagingconv.ClientOperationDuration
	processDu messagingconv.ProcessDuration

	// sbkit's own instruments.
	rejected      metric.Int64Counter
	retries       metric.Int64Counter
	batchDur      metric.Float64Histogram
	senderMsgs    metric.Int64ObservableUpDownCounter
	senderBytes   metric.Int64ObservableUpDownCounter
	outcomes      metric.Int64Counter
	settleFails   metric.Int64Counter
	procErrors    metric.Int64Counter
	running       metric.Int64ObservableUpDownCounter
	buffered      metric.Int64ObservableUpDownCounter
	held          metric.Int64ObservableUpDownCounter
	sessions      metric.Int64ObservableUpDownCounter
	renewals      metric.Int64Counter
	renewFailures metric.Int64Counter
	locksLost     metric.Int64Counter
	dedupe        metric.Int64Counter
	redeliveries  metric.Int64Counter
	breaker       metric.Int64Counter
}

// New returns a Telemetry with opts (nil means the defaults). Its instruments are
// created at once; New fails only when the meter refuses one (an error wrapping
// [ErrInvalidOptions] then says which).
func New(opts *Options) (*Telemetry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.Propagator == nil {
		o.Propagator = otel.GetTextMapPropagator()
	}
	t := &Telemetry{
		tracer:     o.TracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		meter:      o.MeterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL)),
		propagator: o.Propagator,
		opts:       o,
	}
	if err := t.instruments(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return t, nil
}

// durationBuckets are the histogram bucket boundaries, in seconds, that the messaging
// conventions give for messaging.client.operation.duration and
// messaging.process.duration.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// instruments creates every instrument; see the package documentation for the list.
func (t *Telemetry) instruments() error {
	m := t.meter
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	t.sent, err = messagingconv.NewClientSentMessages(m)
	add(err)
	t.consumed, err = messagingconv.NewClientConsumedMessages(m)
	add(err)
	t.opDur, err = messagingconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)
	t.processDu, err = messagingconv.NewProcessDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)

	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		add(err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		g, err := m.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		add(err)
		return g
	}
	t.rejected = counter("sbkit.sender.rejected", "{message}",
		"Messages the sender did not accept (window full, sender closed, context ended).")
	t.retries = counter("sbkit.sender.retries", "{retry}",
		"Retries of messages after a transient failure (a retried batch of n messages counts n).")
	t.batchDur, err = m.Float64Histogram("sbkit.sender.batch.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the sender's batch requests."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)
	t.senderMsgs = gauge("sbkit.sender.inflight.messages", "{message}",
		"Messages accepted by the sender and waiting for their outcome.")
	t.senderBytes = gauge("sbkit.sender.inflight.bytes", "By",
		"Estimated size of the messages in flight in the sender.")
	t.outcomes = counter("sbkit.processor.outcomes", "{message}",
		"Received messages by how they ended: complete, abandon, dead_letter, defer, lock_lost, left_locked, dropped.")
	t.settleFails = counter("sbkit.processor.settle.failures", "{attempt}",
		"Failed settlement calls, retried or not.")
	t.procErrors = counter("sbkit.processor.errors", "{error}",
		"Errors the processor reported, by source (receive, handler, settle, renew, accept).")
	t.running = gauge("sbkit.processor.handlers.running", "{handler}", "Handlers running now.")
	t.buffered = gauge("sbkit.processor.messages.buffered", "{message}",
		"Received messages waiting for a handler.")
	t.held = gauge("sbkit.processor.messages.held", "{message}",
		"Failed messages held locked before they are abandoned (AbandonDelay).")
	t.sessions = gauge("sbkit.processor.sessions.held", "{session}", "Sessions held by a session processor.")
	t.renewals = counter("sbkit.lock.renewals", "{renewal}", "Successful lock renewals.")
	t.renewFailures = counter("sbkit.lock.renew.failures", "{attempt}", "Failed lock renewal attempts.")
	t.locksLost = counter("sbkit.lock.lost", "{lock}", "Locks lost, by reason.")
	t.dedupe = counter("sbkit.dedupe.outcomes", "{delivery}",
		"Duplicate filter events: fresh, duplicate, contended, lease_lost, store_error.")
	t.redeliveries = counter("sbkit.processor.redeliveries", "{message}",
		"Delayed redelivery decisions: scheduled, schedule_failed, exhausted.")
	t.breaker = counter("sbkit.processor.breaker.changes", "{change}",
		"Circuit breaker state changes, by the state entered: open, half-open, closed.")
	return errors.Join(errs...)
}

// Attribute keys of sbkit's own, for what the semantic conventions do not name.
const (
	// OutcomeKey is how a received message ended ([Telemetry]'s sbkit.processor.outcomes).
	OutcomeKey = attribute.Key("sbkit.outcome")
	// RedeliveryAttemptKey is a redelivered copy's attempt (its
	// [sbkit.RedeliveryAttemptProperty]), on its process span.
	RedeliveryAttemptKey = attribute.Key("sbkit.redelivery.attempt")
	// RedeliveryOutcomeKey is a delayed redelivery decision: scheduled, schedule_failed,
	// exhausted.
	RedeliveryOutcomeKey = attribute.Key("sbkit.redelivery.outcome")
	// BreakerStateKey is the state a circuit breaker entered: open, half-open, closed.
	BreakerStateKey = attribute.Key("sbkit.breaker.state")
	// ErrorSourceKey is the part of the processor an error came from.
	ErrorSourceKey = attribute.Key("sbkit.error.source")
	// LockKindKey is "message" or "session".
	LockKindKey = attribute.Key("sbkit.lock.kind")
	// LockLostReasonKey says why a lock was lost: lock_lost, expired, connection_lost,
	// limit, renew_failed.
	LockLostReasonKey = attribute.Key("sbkit.lock.lost_reason")
	// DedupeOutcomeKey is a duplicate filter event: fresh, duplicate, contended,
	// lease_lost, store_error.
	DedupeOutcomeKey = attribute.Key("sbkit.dedupe.outcome")
	// DedupeOperationKey is the store operation that failed, for store_error.
	DedupeOperationKey = attribute.Key("sbkit.dedupe.operation")
	// AttemptsKey is how many requests a send or a settlement took, when not one (spans
	// only).
	AttemptsKey = attribute.Key("sbkit.attempts")
	// DeadLetterReasonKey is the reason given when dead-lettering (spans only).
	DeadLetterReasonKey = attribute.Key("sbkit.dead_letter.reason")
	// SessionIDKey is the message's session (spans only).
	SessionIDKey = attribute.Key("sbkit.session.id")
)

// entityAttrs are the attributes every span and metric of one entity carries.
func (t *Telemetry) entityAttrs(entity, subscription string) []attribute.KeyValue {
	kv := []attribute.KeyValue{semconv.MessagingSystemServiceBus, semconv.MessagingDestinationName(entity)}
	if subscription != "" {
		kv = append(kv, semconv.MessagingDestinationSubscriptionName(subscription))
	}
	if t.opts.ServerAddress != "" {
		kv = append(kv, semconv.ServerAddress(t.opts.ServerAddress))
	}
	return kv
}

// set is attribute.NewSet of base followed by more.
func set(base []attribute.KeyValue, more ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(with(base, more...)...)
}

// with returns base followed by more, in a new slice.
func with(base []attribute.KeyValue, more ...attribute.KeyValue) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, len(base)+len(more))
	kv = append(kv, base...)
	return append(kv, more...)
}
