// Package sbotel turns sbkit's hooks into OpenTelemetry traces and metrics, following
// the OpenTelemetry semantic conventions for messaging and for Azure Service Bus
// (semconv v1.43.0). It is a module of its own (github.com/sbkit/sbkit/otel), so that
// the core module never depends on OpenTelemetry; it depends only on the OpenTelemetry
// API (otel, trace, metric, semconv) and on sbkit.
//
//	tel, err := sbotel.New(nil) // the global tracer provider, meter provider and propagator
//	sh := tel.Sender("orders")
//	s, err := sender.New(sdkSender, &sender.Options{Hooks: []sender.Hook{sh}})
//	reg, err := sh.Observe(s) // in-flight gauges; reg.Unregister() when s is closed
//
//	ph := tel.Processor("orders", "")
//	p, err := receiver.New(src, handler, &receiver.Options{Hooks: []receiver.Hook{ph}})
//	reg, err = ph.Observe(p)
//
// # Traces
//
// A [SenderHook] starts a send span per message (kind PRODUCER, "send <entity>",
// messaging.operation.type send) when the message is given to the Sender and ends it
// with the message's outcome, so that it covers linger, batching and retries; retries
// are "retry" events with the attempt number. The span's context is the message's
// creation context: it is written into the message's ApplicationProperties before the
// Sender measures the message. A message that already carries a creation context keeps
// it, and its send span (kind CLIENT) links to it, as the conventions ask. Batch
// requests are not spans: a batch carries many callers' messages, and each message's
// span already covers its request (sbkit.sender.batch.duration measures them).
//
// A [ProcessorHook] starts a process span per handler call (kind CONSUMER, "process
// <entity>", messaging.operation.type process), with messaging.message.id,
// messaging.servicebus.message.delivery_count, messaging.servicebus.message.enqueued_time
// and messaging.message.conversation_id (the CorrelationID), and, for a copy made by
// delayed redelivery, sbkit.redelivery.attempt. It links to the producer's
// creation context and, by default, is that context's child, so that one trace runs from
// the producer's request to the consumer's handler and everything the handler does. The
// conventions make links the default and allow the parent "exclusively for single
// messages scenarios", which a processor's handler call is; sbkit takes the parent so
// that a trace does not stop at the queue (many trace viewers show links poorly or not at
// all), as the .NET processor does. When the handler's context already carries a span
// (Run was given a context with one), the process span stays its child and only links to
// the producer, as the conventions recommend; [Options.DisableProducerParent] makes it
// link only, always. Settlements are spans (kind CLIENT, "complete <entity>",
// "dead_letter <entity>", ..., messaging.operation.type settle,
// messaging.servicebus.disposition_status, sbkit.dead_letter.reason), children of the
// process span. Lock renewals, failed renewals and lost locks, and the duplicate filter's
// decisions, are events on the process span. ReceiveMessages calls are not spans (a
// processor's receive loop is not the application's call, and an idle one would make a
// span per empty poll): they are measured.
//
// # Propagation
//
// Trace context travels in the message's ApplicationProperties. The propagator
// ([Options.Propagator], default the global one) writes its fields, for W3C Trace
// Context traceparent and tracestate; and the Diagnostic-Id property gets the
// traceparent value of the same context, as the Service Bus SDKs for .NET, Java and
// Python write it. Reading follows those SDKs' order: the propagator's fields, then
// traceparent, then Diagnostic-Id; so a message from any of them, including an older
// one that writes only Diagnostic-Id, joins its trace, and a message from sbkit joins
// theirs, even when no global propagator is set. [Options.DisableDiagnosticID] turns
// Diagnostic-Id off.
//
// # Metrics
//
// Every metric has messaging.system "servicebus", messaging.destination.name (and
// messaging.destination.subscription.name, server.address when known); none has a
// message id or any other per-message value. From the semantic conventions:
//
//	messaging.client.sent.messages      {message}  counter: messages sent (error.type when they failed)
//	messaging.client.consumed.messages  {message}  counter: messages received by the processor
//	messaging.client.operation.duration s          histogram: send (per message, acceptance to outcome),
//	                                               receive (per ReceiveMessages call), complete, abandon,
//	                                               dead_letter, defer (per settlement, retries included)
//	messaging.process.duration          s          histogram: handler calls (error.type when the handler
//	                                               failed or panicked)
//
// sbkit's own, prefixed sbkit.:
//
//	sbkit.sender.rejected               {message}  counter: messages not accepted (error.type full, closed, ...)
//	sbkit.sender.retries                {retry}    counter: message retries
//	sbkit.sender.batch.duration         s          histogram: batch requests
//	sbkit.sender.inflight.messages      {message}  gauge (SenderHook.Observe)
//	sbkit.sender.inflight.bytes         By         gauge (SenderHook.Observe)
//	sbkit.processor.outcomes            {message}  counter by sbkit.outcome: complete, abandon, dead_letter,
//	                                               defer, lock_lost, left_locked, dropped, redelivered
//	sbkit.processor.redeliveries        {message}  counter by sbkit.redelivery.outcome: scheduled,
//	                                               schedule_failed, exhausted
//	sbkit.processor.breaker.changes     {change}   counter by sbkit.breaker.state: open, half-open, closed
//	sbkit.processor.settle.failures     {attempt}  counter: failed settlement calls
//	sbkit.processor.errors              {error}    counter by sbkit.error.source
//	sbkit.processor.handlers.running    {handler}  gauge (ProcessorHook.Observe)
//	sbkit.processor.messages.buffered   {message}  gauge (ProcessorHook.Observe)
//	sbkit.processor.messages.held       {message}  gauge (ProcessorHook.Observe)
//	sbkit.processor.sessions.held       {session}  gauge (ProcessorHook.ObserveSessions)
//	sbkit.lock.renewals                 {renewal}  counter by sbkit.lock.kind (message, session)
//	sbkit.lock.renew.failures           {attempt}  counter by sbkit.lock.kind and error.type
//	sbkit.lock.lost                     {lock}     counter by sbkit.lock.kind and sbkit.lock.lost_reason
//	sbkit.dedupe.outcomes               {delivery} counter by sbkit.dedupe.outcome: fresh, duplicate,
//	                                               contended, lease_lost, store_error
//
// They agree with the Stats snapshots: sent.messages without error.type is
// [sender.Stats].Sent, with it Failed; sbkit.sender.rejected is Rejected; the outcomes
// are [receiver.Stats].Completed, Abandoned, DeadLettered, Deferred, LocksLost,
// LeftLocked, Dropped and Redelivered; the redeliveries scheduled and exhausted are
// Scheduled and Exhausted; the breaker's changes are BreakerOpened, BreakerHalfOpened
// and BreakerClosed; consumed.messages is Received; the count of
// messaging.process.duration is Handled, with error.type HandlerErrors (panic: Panics);
// the settle failures are SettleErrors; renewals and renew failures are Renewed and
// RenewErrors; the dedupe outcomes are [dedupe.Stats].Processed, DuplicatesSkipped,
// Contended, LeasesLost and StoreErrors.
//
// error.type is the Service Bus error code when there is one (unauthorized, connlost,
// locklost, timeout, notfound, closed), else locklost, full, closed, canceled,
// deadline_exceeded, message_too_large, timeout or panic, else the error's Go type.
//
// # Cost
//
// Measured per message on 2 shared cores (see the README): with no-op providers (the
// globals before an SDK is installed) the sender's hook costs about 0.2 µs and the
// processor's about 0.7 µs; with the SDK's providers 3 µs and 7 µs, most of which are the
// SDK's spans (one send span; a process and a settle span, see
// [Options.DisableSettleSpans]). A message whose process span is sampled out gets no
// message attributes and no settle span.
package sbotel
